"""The report of a job run, for people: Markdown with PNG plots (when matplotlib is installed)
and the same page as one self-contained HTML file.

Each release opens with a first screen in plain words: what was released and for whom,
how accurate it is (the interval in the value's units and as a share of the value), what it
cost (the distribution of the per-user charges, who got privacy for free and how much) and
the budget left. Values, privacy levels (summarised as ranges) and details follow; a
glossary ends the page.

Everything in the report is a released (noisy) value, its accuracy metadata, or a function
of the ε vectors, the bounds and the budgets, which are public in this model; validation
counts and user ids never appear.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hdp_spark.core.selection.spec import guarantee_words
from hdp_spark.ledger._fs import atomic_write
from hdp_spark.report.plots import (
    plot_comparison,
    plot_estimates,
    plot_levels,
    plot_remaining,
)
from hdp_spark.report.summary import (
    CELL_KINDS,
    PERSON_KINDS,
    Cost,
    ValueRow,
    charge_classes,
    eps_label,
    eps_ranges,
    key_label,
    release_cost,
    selection_classes,
    smallest_eps,
    value_rows,
)

if TYPE_CHECKING:
    from hdp_spark.jobs.engines import BudgetDistribution
    from hdp_spark.jobs.runner import AllocationSummary, ReleaseRun
    from hdp_spark.jobs.spec import JobSpec

__all__ = ["GLOSSARY_HEADING", "render_report", "write_report"]

GLOSSARY_HEADING = "## Glossary"


def _num(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    x = float(v)
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _count(n: float) -> str:
    return f"{int(n):,}"


def _pct(x: float) -> str:
    if not math.isfinite(x):
        return "–"
    if x > 1:
        return "over 100%"
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table; numbers formatted by :func:`_num`."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_num(c) if not isinstance(c, str) else c for c in r) + " |"
            for r in rows]
    return out


def _span(lo: float, hi: float, fmt: Any = _num) -> str:
    """"a" if both print the same, else "a to b"."""
    a, b = fmt(lo), fmt(hi)
    return a if a == b else f"{a} to {b}"


# -- what each kind releases, in words ----------------------------------------------------

_METHODS = {
    "adpm": "rows weighted by min(ε, τ) (Chaudhuri & Courtade, *Mean Estimation Under "
            "Heterogeneous Privacy: Some Privacy Can Be Free*)",
    "uniform": "every row at the smallest ε (what a single-ε library does)",
    "proportional": "rows weighted in proportion to their ε",
    "drop": "the most private rows left out, the rest weighted equally",
}
_CORRELATED = ("weights chosen from the ε levels only (Chaudhuri & Courtade, *Private "
               "Estimation When Data and Privacy Demands Are Correlated*)")


_LOCAL_BASELINE = ("the local-DP baseline: what per-row randomized reports, each at its own "
                   "ε and reweighted, would give (Chaudhuri & Courtade, *Private Estimation "
                   "When Data and Privacy Demands Are Correlated*)")


def _method_words(method: str | None) -> str:
    if method is None:
        return ""
    if method.startswith(("ldp-", "k-rappor")):
        return _LOCAL_BASELINE
    return _METHODS.get(method, _CORRELATED if method.startswith(("hpm", "hpf")) else method)


def _per(by: Sequence[str], n_groups: int, selected: bool = False) -> str:
    kind = "group" if selected else "public group"
    groups = f"1 {kind}" if n_groups == 1 else f"{n_groups} {kind}s"
    if selected:
        groups += " chosen privately by partition selection"
    return f" per {', '.join(by)} ({groups})" if by else ""


def _what_all(aggs: Sequence[dict[str, Any]], by: Sequence[str], n_groups: int,
              selected: bool = False) -> str:
    """What a release publishes, in words (its groups said once)."""
    if len(aggs) == 1:
        return _what(aggs[0], by, n_groups, selected=selected)
    head = (f"{len(aggs)} results{_per(by, n_groups, selected)}: " if by
            else f"{len(aggs)} results: ")
    return head + "; and ".join(_what(a, by, n_groups, per=False) for a in aggs)


def _what(agg: dict[str, Any], by: Sequence[str], n_groups: int, *, per: bool = True,
          selected: bool = False) -> str:
    d, kind = agg["definition"], agg["kind"]
    per_text = _per(by, n_groups, selected) if per else ""
    if kind == "mean":
        return (f"the average of `{d['column']}`{per_text}; values below "
                f"{_num(d['lower'])} or above {_num(d['upper'])} count as that bound")
    if kind == "histogram":
        unit = "number" if d.get("counts") else "share"
        cats = ", ".join(map(str, d["categories"]))
        return (f"the {unit} of rows in each category of `{d['column']}`{per_text} ({cats}; "
                "anything else counts as \"other\")")
    if kind == "user_mean":
        return (f"the average of `{d['column']}`{per_text}, protecting each user with all "
                f"their rows; values below {_num(d['lower'])} or above {_num(d['upper'])} "
                "count as that bound")
    if kind == "heavy_hitters":
        return (f"the most frequent combinations of {', '.join(d['cols'])} with their counts "
                "(only combinations frequent enough to be released safely)")
    if kind == "attribute_histograms":
        return f"a count of people per value of each of {', '.join(d['cols'])}"
    if kind in CELL_KINDS:
        how = ("noisy counts made consistent by projection" if kind == "marginals" else
               "answers of a synthetic table built by MWEM")
        return f"the cross-tabulations (marginals) of {', '.join(d['cols'])}: {how}"
    if kind == "ldp_mean":
        return (f"the average of `{d['report']}`{per_text}, from reports each person's device "
                f"randomized before sending (values within {_num(d['lower'])} to "
                f"{_num(d['upper'])})")
    return f"`{agg['name']}` ({kind}){per_text}"


def _title(agg: dict[str, Any], by: Sequence[str]) -> str:
    """A plot title in words."""
    d, kind = agg["definition"], agg["kind"]
    per = f" per {', '.join(by)}" if by else ""
    if kind in ("mean", "user_mean"):
        who = " (each user with all their rows protected)" if kind == "user_mean" else ""
        return f"Average {d['column']}{per}{who}"
    if kind == "histogram":
        return f"{'Number' if d.get('counts') else 'Share'} of rows per {d['column']}{per}"
    if kind == "heavy_hitters":
        return f"Most frequent {' / '.join(d['cols'])} combinations"
    if kind == "attribute_histograms":
        return "People per value of each attribute"
    if kind in CELL_KINDS:
        return f"People per cell of the marginals of {' / '.join(d['cols'])}"
    if kind == "ldp_mean":
        return f"Average {d['report']}{per} (reports randomized on the devices)"
    return str(agg["name"])


def _units(agg: dict[str, Any]) -> str:
    kind, d = agg["kind"], agg["definition"]
    if kind == "histogram":
        return "people" if d.get("counts") else "share"
    if kind in PERSON_KINDS:
        return "people"
    return f"`{d.get('column', d.get('report', agg['name']))}` units"


def _fmt_value(agg: dict[str, Any]) -> Any:
    if _units(agg) == "share":
        return lambda x: "–" if not math.isfinite(x) else f"{x:.1%}"
    return _num


def _fmt_half(agg: dict[str, Any]) -> Any:
    if _units(agg) == "share":
        return lambda x: "–" if not math.isfinite(x) else f"{100 * x:.2g}"
    return _num


def _half_unit(agg: dict[str, Any]) -> str:
    return " percentage points" if _units(agg) == "share" else f" {_units(agg)}"


def _half(v: ValueRow) -> float:
    return (v.high - v.low) / 2


def _share(v: ValueRow) -> float:
    return _half(v) / abs(v.estimate) if v.estimate and math.isfinite(v.estimate) else math.nan


def _accuracy(agg: dict[str, Any], values: list[ValueRow], level: str) -> str:
    real = [v for v in values if not v.fallback and math.isfinite(_half(v))]
    if not real:
        return "no value could be estimated (every group fell back to the middle of its range)"
    fh = _fmt_half(agg)
    halves = [_half(v) for v in real]
    shares = [s for s in map(_share, real) if math.isfinite(s)]
    unit = _half_unit(agg)
    text = (f"with {level} probability the noise moves each value by at most "
            f"± {_span(min(halves), max(halves), fh)}{unit}")
    if shares:
        text += f" ({_span(min(shares), max(shares), _pct)} of the value)"
    skipped = len(values) - len(real)
    if skipped:
        text += (f"; {skipped} value(s) fell back to the middle of the range (too little "
                 "data for this much privacy)")
    return text


def _cost_words(cost: Cost, budget: dict[str, Any], subject: str = "person") -> str:
    if not cost.users:
        return "nobody was charged"
    lo, med, hi = cost.charged
    if _num(lo) == _num(hi):
        text = f"each of the {_count(cost.users)} people was charged {eps_label(lo)} ε"
    else:
        text = (f"each of the {_count(cost.users)} people was charged between "
                f"{eps_label(lo)} and {eps_label(hi)} ε (median {eps_label(med)})")
    if cost.free_users and cost.saved is not None:
        s_lo, s_med, s_hi = cost.saved
        text += (f". **{_count(cost.free_users)} of them "
                 f"({_pct(cost.free_users / max(cost.users, 1))}) got privacy for free**: "
                 f"charged less than the ε they allowed, by "
                 f"{_span(s_lo, s_hi, eps_label)} ε (median {eps_label(s_med)})")
    else:
        text += ". Nobody was charged less than the ε they allowed"
    capped, excluded = int(budget.get("users_capped", 0)), int(budget.get("users_excluded", 0))
    if capped:
        text += f". {_count(capped)} people had their ε lowered to the budget they had left"
    if excluded:
        text += f". {_count(excluded)} people were left out for lack of budget (charged 0)"
    text += (f". All charges added up: {_num(cost.total)} ε over {_count(cost.users)} "
             f"people — a total, not one {subject}'s loss")
    return text


def _budget_left(d: BudgetDistribution | None) -> str:
    if d is None or not d.remaining_quantiles:
        return "not computed"
    q = d.remaining_quantiles
    lo, med, hi = q.get(0.0, math.nan), q.get(0.5, math.nan), q.get(1.0, math.nan)
    none = (f"{_count(d.exhausted)} of {_count(d.users)} have none left" if d.exhausted
            else "nobody has run out")
    return (f"after this run, people have {_span(lo, hi, eps_label)} ε left (median "
            f"{eps_label(med)}); {none} (all releases on this ledger, see the end of the "
            "report)")


# -- one release --------------------------------------------------------------------------


class _Plots:
    def __init__(self, out: Path, enabled: bool) -> None:
        self.out, self.enabled = out, enabled

    def link(self, png: Path | None, alt: str) -> list[str]:
        if png is None:
            return []
        return [f"![{alt}]({png.relative_to(self.out).as_posix()})", ""]

    def path(self, release_id: str, name: str) -> Path:
        return self.out / "plots" / f"{release_id}__{name}.png"


def _release_section(
    plots: _Plots, run: ReleaseRun, job: JobSpec, dist: BudgetDistribution | None
) -> list[str]:
    outcome = run.record.outcome_data()
    by = list(outcome["by"])
    rows: list[dict[str, Any]] = outcome["rows"]
    aggs: list[dict[str, Any]] = outcome["aggregators"]
    budget: dict[str, Any] = outcome["budget"]
    charge_mode = str(budget.get("charge", "effective"))
    rid = run.release_id
    selection = outcome.get("selection")
    per_agg = {a["name"]: charge_classes(a, rows, by, charge_mode) for a in aggs}
    if selection is not None:  # κ_i charged once for the release, over the whole table
        per_agg = {"": selection_classes(outcome)}
    charging = [c for c in per_agg.values() if c is not None]
    cost = release_cost(charging)
    values = {a["name"]: value_rows(a, rows, by) for a in aggs}
    betas = {float(a["definition"].get("beta", 0.05)) for a in aggs}
    level = " / ".join(f"{1 - b:.0%}" for b in sorted(betas, reverse=True)) or "95%"

    lines = [f"## Release `{rid}`", ""]
    charged = any(c is not None for c in per_agg.values())
    status = (("computed and charged in this run" if charged else
               "computed in this run; nothing charged") if run.status == "committed" else
              "computed in an earlier run and published again (nothing charged now)")
    lines += [f"_{status.capitalize()}._", ""]
    what = _what_all(aggs, by, len(rows), selection is not None)
    lines += [f"- **What:** {what}."]
    if selection is not None:
        lines += [f"- **Guarantee:** {guarantee_words(selection)}."]
    if cost is not None:
        allowed = [(a, u) for _, _, u, a, _ in cost.classes if u]
    else:  # aggregators on other ε levels: the people of the first one that reads rows
        allowed = next(([(c.eps, c.users) for c in cl if c.users] for cl in charging
                        if any(c.users for c in cl)), [])
    users = sum(u for _, u in allowed)
    if selection is not None and allowed:
        lo, hi = min(a for a, _ in allowed), max(a for a, _ in allowed)
        whom = (f"{_count(users)} people, all of them read by the selection whether or not "
                f"their group was published, with ε from {eps_label(lo)} to {eps_label(hi)} "
                "(after capping at c and to their budget)")
    elif charging and not allowed:
        whom = "nobody: no row of the input falls in the release's public groups"
    elif allowed:
        lo, hi = min(a for a, _ in allowed), max(a for a, _ in allowed)
        whom = (f"{_count(users)} people, each with their own privacy level ε from "
                f"{eps_label(lo)} to {eps_label(hi)} (the ε they allowed for this release, "
                "after capping to their budget)" if eps_label(lo) != eps_label(hi) else
                f"{_count(users)} people, all at the same privacy level ε = {eps_label(lo)} "
                "for this release")
    else:
        reports = sum(int(lv.get("n") or 0) for a in aggs for r in rows
                      for lv in (r.get(f"{a['name']}_eps_levels") or []))
        whom = (f"{_count(reports)} device reports, each randomized with its own ε before "
                "it was sent")
    lines += [f"- **For whom:** {whom}."]
    for a in aggs:
        prefix = "" if len(aggs) == 1 else f" (`{a['name']}`)"
        if a["kind"] in PERSON_KINDS and not values[a["name"]]:
            lines += [f"- **Accuracy{prefix}:** no record was frequent enough to be released."]
            continue
        if a["kind"] == "mwem":
            lines += [f"- **Accuracy{prefix}:** answers of a synthetic table fitted to a few "
                      "noisy measurements (MWEM); no per-value interval."]
            continue
        lines += [f"- **Accuracy{prefix}:** {_accuracy(a, values[a['name']], level)}."]
    when = "" if run.status == "committed" else (
        " (charged once, when it was first computed; nothing now)")
    if cost is not None:
        lines += [f"- **Cost{when}:** {_cost_words(cost, budget)}."]
    elif charging:
        for a in aggs:
            classes = per_agg[a["name"]]
            single = release_cost([classes]) if classes else None
            if single is not None:
                lines += [f"- **Cost{when} (`{a['name']}`):** "
                          f"{_cost_words(single, budget)}."]
        lines += ["- Charges of the aggregators above add up for people they both read."]
    else:
        lines += ["- **Cost:** nothing charged: the reports were randomized on the devices, "
                  "each spending its ε there; this release only combines them."]
    lines += [f"- **Budget left:** {_budget_left(dist)}.", ""]

    for a in aggs:
        lines += _values_section(plots, rid, a, values[a["name"]], by, level, rows, len(aggs))
    if cost is not None and cost.users:
        lines += _levels_section(plots, rid, cost, len(charging))
    lines += _details_section(run, aggs, rows, by, budget, plots.out, selection)
    return lines


def _values_section(
    plots: _Plots, rid: str, agg: dict[str, Any], values: list[ValueRow], by: list[str],
    level: str, rows: list[dict[str, Any]], n_aggs: int,
) -> list[str]:
    name = agg["name"]
    title = "### Values" if n_aggs == 1 else f"### Values of `{name}`"
    lines = [title, ""]
    if not values:
        return [*lines, "_No value was released._", ""]
    fv, fh = _fmt_value(agg), _fmt_half(agg)
    has_base = any(v.baseline is not None for v in values)
    first = ", ".join(by) if by else ("category" if agg["kind"] == "histogram" else "value")
    if agg["kind"] in PERSON_KINDS:
        first = " / ".join(agg["definition"]["cols"]) if agg["kind"] == "heavy_hitters" \
            else "marginal: values" if agg["kind"] in CELL_KINDS else "attribute / value"
    pm = "± (percentage points)" if _units(agg) == "share" else "±"
    header = [first, "estimate", f"{level} interval", pm, "± as share of the value"]
    mins = sorted({m for m in (smallest_eps(agg, [r]) for r in rows) if m is not None})
    base_eps = (f"ε = {eps_label(mins[0])}" if len(mins) == 1 else
                f"each group's smallest ε, {_span(mins[0], mins[-1], eps_label)}"
                if mins else "")
    if has_base:
        header.append(f"± with one ε for all ({base_eps})")
    body = []
    for v in values:
        cells = [v.label, fv(v.estimate) + (" (fallback)" if v.fallback else ""),
                 f"{fv(v.low)} to {fv(v.high)}", fh(_half(v)), _pct(_share(v))]
        if has_base:
            cells.append(fh(v.baseline) if v.baseline is not None else "–")
        body.append(cells)
    lines += _table(header, body)
    lines += ["", f"The noise added for privacy stays inside the interval with probability "
              f"≥ {level}; the interval does not include sampling error."]
    if not has_base:
        lines += [_NO_BASELINE.get(agg["kind"], "")]
    else:
        lines += [f"The last column is the ± a library that gives everyone the same ε would "
                  f"publish: to respect every person's demand it must use the smallest ε of "
                  f"the group ({base_eps}) for every row."]
    lines.append("")
    if not plots.enabled:
        return lines
    what = _title(agg, by)
    ylabel = "share of rows" if _units(agg) == "share" else (
        "people" if _units(agg) == "people" else f"{agg['definition'].get('column', name)}")
    labels = [v.label for v in values]
    png = plot_estimates(
        plots.path(rid, name), labels,
        {name: ([v.estimate for v in values], [v.low for v in values],
                [v.high for v in values])},
        title=what, ylabel=ylabel, level=level)
    lines += plots.link(png, f"{what}, with {level} intervals")
    if has_base:
        half = [v.baseline if v.baseline is not None else math.nan for v in values]
        lo_bound, hi_bound = _bounds(agg)
        base_lo = [max(v.estimate - h, lo_bound) for v, h in zip(values, half, strict=True)]
        base_hi = [min(v.estimate + h, hi_bound) for v, h in zip(values, half, strict=True)]
        png = plot_comparison(
            plots.path(rid, name + "__vs_single_eps"), labels, [v.estimate for v in values],
            ([v.low for v in values], [v.high for v in values]), (base_lo, base_hi),
            title=f"{level} interval: this release vs one ε for everyone", ylabel=ylabel,
            level=level,
            baseline_label=f"one ε for all, {base_eps} ({level} interval)")
        lines += plots.link(png, f"{level} interval of this release beside a single-ε "
                                 "library's")
    return lines


def _bounds(agg: dict[str, Any]) -> tuple[float, float]:
    d = agg["definition"]
    if agg["kind"] == "histogram":
        return (0.0, math.inf if d.get("counts") else 1.0)
    return (float(d.get("lower", -math.inf)), float(d.get("upper", math.inf)))


def _levels_section(plots: _Plots, rid: str, cost: Cost, n_charging: int) -> list[str]:
    ranges = eps_ranges(cost)
    summed = (f" Each of the release's {n_charging} aggregators may use up to a person's ε, "
              "so the ε allowed here is their sum." if n_charging > 1 else "")
    lines = ["### Privacy levels", "",
             "How much privacy people allowed this release (ε allowed, grouped into ranges) "
             f"and what they were charged.{summed}", ""]
    lines += _table(
        ["ε allowed", "people", "ε charged", "got privacy for free"],
        [[r.label, _count(r.users), _span(r.charged_lo, r.charged_hi, eps_label),
          f"{_count(r.free_users)} ({_pct(r.free_users / max(r.users, 1))})"
          if r.free_users else "none"]
         for r in ranges],
    )
    lines.append("")
    if plots.enabled:
        png = plot_levels(plots.path(rid, "privacy_levels"), [r.label for r in ranges],
                          [r.users - r.free_users for r in ranges],
                          [r.free_users for r in ranges],
                          title="People per privacy level (ε allowed)")
        lines += plots.link(png, "people per privacy level")
    return lines


def _details_section(
    run: ReleaseRun, aggs: list[dict[str, Any]], rows: list[dict[str, Any]], by: list[str],
    budget: dict[str, Any], out: Path, selection: dict[str, Any] | None = None,
) -> list[str]:
    lines = ["### Details", "",
             f"Commit `{run.record.commit_id}` at {run.record.committed_at}; values in "
             f"`{(run.path / 'values.parquet').relative_to(out)}` and `values.json`. "
             f"Budget rule: over budget, {_POLICY.get(budget['policy'], budget['policy'])}; "
             f"{_CHARGE.get(str(budget.get('charge', 'effective')), '')}.", ""]
    if selection is not None:
        lines += [
            f"Partition selection: c = {_num(selection['c'])}, δ = {selection['delta']:g}, "
            f"selection share f = {_num(selection['share'])}, step γ = "
            f"{selection['step']:g}, neighbours: {selection['neighbours']}. A group is "
            "published only if its noisy weight (`_weight`, the noisy sum of its members' "
            "κ_i) reaches the threshold; each person's whole charge is κ_i for this release "
            "(a share f of it chooses the groups, the rest releases the statistics), and δ "
            "composes additively over releases (the ledger records it per release; it "
            "budgets ε only). Groups are listed in key order; the number of groups in the "
            "data and each group's row count are private and not shown.", ""]
    for a in aggs:
        name, kind, d = a["name"], a["kind"], a["definition"]
        method = d.get("method") if selection is None else None
        lines += [f"- `{name}`: {_KIND_WORDS.get(kind, kind)}"
                  + (f"; {_method_words(method)}" if method else "") + "."]
        if kind in CELL_KINDS and rows:
            r = rows[0]
            lines += [f"  Each attribute of each person is protected with ε = "
                      f"{eps_label(float(r.get(f'{name}_eps_attribute') or math.nan))}; a "
                      f"whole person's record with ε = "
                      f"{eps_label(float(r.get(f'{name}_eps_person') or math.nan))}, both "
                      f"with δ = {r.get(f'{name}_delta')} (zCDP ρ = "
                      f"{float(r.get(f'{name}_rho_person') or math.nan):.4g} per person, "
                      "converted to (ε, δ); the ledger charges this ε)."]
        elif kind in PERSON_KINDS and rows:
            r = rows[0]
            lines += [f"  Each attribute of each person is protected with ε = "
                      f"{eps_label(float(r.get(f'{name}_eps0') or math.nan))}; a whole "
                      f"person's record (all their attributes together) with ε = "
                      f"{eps_label(float(r.get(f'{name}_eps_person') or math.nan))}."]
    lines.append("")
    detail = [a for a in aggs if a["kind"] in ("mean", "histogram", "user_mean", "ldp_mean")
              and selection is None]
    for a in detail:
        name = a["name"]
        unit = "users" if a["kind"] == "user_mean" else (
            "reports" if a["kind"] == "ldp_mean" else "people")
        count_col = f"{name}_users" if a["kind"] == "user_mean" else f"{name}_n"
        header = [", ".join(by) if by else "group", unit]
        has_tau = a["kind"] == "mean"
        if has_tau:
            header.append("privacy-for-free threshold τ")
        header.append("estimated, or fallback to the middle")
        body = []
        for r in rows:
            cells: list[Any] = [key_label(r, by), _count(_f0(r.get(count_col)))]
            if has_tau:
                cells.append(_tau(r.get(f"{name}_tau")))
            cells.append("fallback" if r.get(f"{name}_fallback") else "estimated")
            body.append(cells)
        if len(detail) > 1:
            lines += [f"`{name}`:", ""]
        lines += [*_table(header, body), ""]
    return lines


def _f0(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def _tau(t: Any) -> str:
    if not isinstance(t, int | float) or math.isnan(t):
        return "–"
    if math.isinf(t):
        return "none (nobody above it)"
    return eps_label(float(t))


_NO_BASELINE = {
    "mean": "No single-ε comparison: no group has rows with a positive, finite ε.",
    "histogram": "No single-ε comparison: no group has rows with a positive, finite ε.",
    "user_mean": "No single-ε comparison is shown for the user-level average (no single-ε "
                 "user-level baseline is computed here).",
    "heavy_hitters": "No single-ε comparison: this release gives every person the same ε "
                     "already.",
    "attribute_histograms": "No single-ε comparison: this release gives every person the "
                            "same ε already.",
    "marginals": "No single-ε comparison: this release gives every person the same ε already. "
                 "The estimate is the noisy count; the projected (consistent) counts are in "
                 "the values file.",
    "mwem": "No single-ε comparison: this release gives every person the same ε already.",
    "ldp_mean": "No single-ε comparison: the noise was added on the devices, each with its "
                "own ε, before this release combined the reports.",
}

_KIND_WORDS = {
    "mean": "average, each row with its own ε",
    "histogram": "category shares, each row with its own ε",
    "user_mean": "average protecting each user with all their rows (Cummings et al., "
                 "*Mean Estimation with User-level Privacy under Data Heterogeneity*)",
    "heavy_hitters": "frequent records, each attribute protected separately (Ghazi et al., "
                     "*Algorithms with More Granular Differential Privacy Guarantees*)",
    "attribute_histograms": "one count per attribute value, each attribute protected "
                            "separately (the same paper)",
    "marginals": "marginals by the projection mechanism, each attribute protected separately "
                 "(the same paper, §4.1)",
    "mwem": "marginals answered by partial-DP MWEM, each attribute protected separately "
            "(the same paper, §4.2)",
    "ldp_mean": "combination of reports randomized on the devices (Aliakbarpour et al., "
                "*High-Probability Bounds For Heterogeneous Local Differential Privacy*)",
}
_POLICY = {
    "cap": "a person's ε is lowered to what they have left",
    "exclude": "a person is left out",
    "fail": "the release is refused",
}
_CHARGE = {
    "effective": "each person is charged the privacy loss the release actually gave them "
                 "(at most the ε they allowed)",
    "demand": "each person is charged the full ε they allowed",
}

_GLOSSARY = [
    ("ε (epsilon), privacy level",
     "how much one person's data may change what is published. Smaller is more private: "
     "with ε = 0.1 the published numbers look almost the same whether or not the person is "
     "in the data; with ε = 4 a careful observer may learn something about them. Every "
     "person here chose their own ε."),
    ("interval (95%)",
     "the range that contains the value we would have published without privacy noise, "
     "with probability at least 95%. It does not cover sampling error (how the people in "
     "the table differ from a wider population)."),
    ("± and ± as share of the value",
     "half the width of the interval, in the value's own units, and that half-width "
     "divided by the published value."),
    ("privacy for free",
     "a person who allowed a large ε is charged less than they allowed when using more of "
     "their ε would not make the result more accurate. They get stronger privacy at no "
     "cost in accuracy, and keep the rest of their budget for later releases."),
    ("why rows with a tiny ε barely move the estimate",
     "a person who asks for very strong privacy (a tiny ε) gets a small weight in the "
     "average, so that changing their value changes the result by less than the noise "
     "hides; people with larger ε carry more weight."),
    ("one ε for all (single-ε library)",
     "what a library that gives everyone the same ε publishes: to respect every demand it "
     "must use the smallest ε of the group for every row, which widens the interval."),
    ("charge, budget, budget left",
     "each person has a total budget of ε across all releases on this ledger; every "
     "release charges each person the privacy it used, and charges add up over releases. "
     "A person whose budget is spent is not used again."),
    ("all charges added up",
     "the sum of everybody's charge in one release; a bookkeeping total, not the privacy "
     "loss of any one person (that is at most their own charge)."),
    ("fallback",
     "when a group has too little data for the privacy asked, the release publishes the "
     "middle of the allowed range instead of an estimate (it says nothing about the data)."),
    ("threshold τ",
     "the level above which extra ε does not help the average: people above it are "
     "charged τ only (privacy for free)."),
    ("partition selection, δ (delta)",
     "when the groups themselves are private, a group is published only if its noisy total "
     "weight (the sum of its members' min(ε, c)) reaches a threshold, so that a group "
     "holding a single person appears with probability at most δ (say one in ten million). "
     "Each person is then protected with (κ, δ): privacy loss at most κ = min(ε, c), except "
     "with probability δ."),
    ("user-level protection",
     "the whole history of a user (all their rows) is protected with their ε, not each row "
     "separately."),
    ("per-attribute protection",
     "each column of a person's record (say, their region) is protected with ε₀; their "
     "whole record with the larger per-person ε shown beside it."),
    ("device-randomized reports (local privacy)",
     "each person's device added noise before sending the value, so the server never sees "
     "it; combining the reports costs nothing more."),
]


def _glossary() -> list[str]:
    lines = [GLOSSARY_HEADING, ""]
    lines += [f"- **{term}**: {text}" for term, text in _GLOSSARY]
    lines.append("")
    return lines


def render_report(
    out: Path,
    job: JobSpec,
    runs: Sequence[ReleaseRun],
    distribution: BudgetDistribution,
    *,
    plots: bool = True,
    allocation: AllocationSummary | None = None,
) -> str:
    """The report's Markdown text (plots are written under ``out/plots``).

    Privacy:
        Shows released values with their accuracy metadata and functions of the public ε
        vectors, bounds and budgets only (per-user charges only as their distribution);
        never user ids, validation counts, the input fingerprint or the idempotency key
        (the commit id it shows is random).
    """
    draw = _Plots(out, plots and _has_matplotlib())
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    src = str(job.input.path) if job.input.path is not None else f"table `{job.input.table}`"
    budget = []
    if job.budget.default is not None:
        budget.append(f"{_num(job.budget.default)} ε per person in total")
    if job.budget.column is not None:
        budget.append(f"per person from column `{job.budget.column}`")
    lines = [
        f"# Release report: `{job.name}`",
        "",
        *([job.description, ""] if job.description else []),
        "Releases in this run:",
        "",
        *[f"- [{r.release_id}](#release-{r.release_id.lower()}) — "
          + _what_all(r.record.outcome_data()["aggregators"], r.record.outcome_data()["by"],
                      len(r.record.outcome_data()["rows"]),
                      "selection" in r.record.outcome_data())
          for r in runs],
        "",
        *_table(
            ["setting", "value"],
            [
                ["run at (UTC)", now],
                ["engine", job.engine],
                ["input", f"`{src}`"],
                ["ledger", f"{job.ledger_backend}: `{job.ledger.path}`"],
                ["privacy budget", f"{'; '.join(budget)}, across all releases on this "
                 f"ledger; over budget, {_POLICY.get(job.budget.policy, job.budget.policy)}"],
                ["budget allocation", _ALLOCATION.get(job.budget.allocation,
                                                      job.budget.allocation)],
            ],
        ),
        "",
        *_allocation_lines(allocation),
    ]
    if job.unsafe_seed is not None:
        lines += ["> **UNSAFE**: this job sets `unsafe_seed`; its noise is reproducible by "
                  "anyone who knows the seed and the values below are NOT private.", ""]
    lines += [
        "Privacy levels (ε) and budgets are public in this model: the report shows how many "
        "people have which ε, never who. Terms are explained in the glossary at the end.",
        "",
    ]
    for run in runs:
        lines += _release_section(draw, run, job, distribution)
    d = distribution
    q = d.remaining_quantiles
    lines += [
        "## Budget left after this run",
        "",
        f"{_count(d.users)} people in the input; {_count(d.exhausted)} have no budget left. "
        f"Half of them have at least {eps_label(q.get(0.5, math.nan))} ε left.",
        "",
        *_table(
            ["share of people", "ε left (at most)", "ε spent so far (at most)"],
            [[f"{p:.0%}", eps_label(d.remaining_quantiles.get(p, math.nan)),
              eps_label(d.spent_quantiles.get(p, math.nan))]
             for p in d.remaining_quantiles],
        ),
        "",
        "Read a line as: that share of people has at most this much ε left (and, separately, "
        "has spent at most this much).",
        "",
    ]
    if draw.enabled and d.hist_counts:
        png = plot_remaining(out / "plots" / "remaining_budget.png", d.hist_edges,
                             d.hist_counts)
        lines += draw.link(png, "privacy budget left per person")
    if plots and not draw.enabled:
        lines += ["_Plots skipped: install matplotlib to get them._", ""]
    lines += _glossary()
    return "\n".join(lines)


_ALLOCATION = {
    "sequential": "sequential: each release may use all the budget a person has left",
    "equal": "equal: each release may use an equal share of the budget a person had left "
             "when the run started",
    "optimal": "optimal: each release may use the share of the budget a person had left "
               "when the run started that minimizes the weighted predicted error",
}


def _allocation_lines(allocation: AllocationSummary | None) -> list[str]:
    """The shares of the run's budget allocation and the predicted error of each method."""
    if allocation is None or not allocation.shares:
        return []
    errors = ", ".join(f"{m} {_num(e)}" for m, e in sorted(allocation.errors.items()))
    return [
        f"Budget allocation ({allocation.method}): the share of each person's remaining "
        "budget each release computed in this run could use, chosen from the public ε "
        "values, budgets and release weights before anything was computed.",
        "",
        *_table(["release", "share"],
                [[rid, _num(share)] for rid, share in allocation.shares.items()]),
        "",
        f"Weighted predicted error (noise variance / range², summed over groups): {errors}.",
        "",
    ]


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_report(
    out: Path,
    job: JobSpec,
    runs: Sequence[ReleaseRun],
    distribution: BudgetDistribution,
    *,
    allocation: AllocationSummary | None = None,
) -> Path:
    """Write ``out/report.md`` and its plots, and the same page as the self-contained
    ``out/report.html`` (images embedded); both atomically. Returns the Markdown's path.

    Privacy:
        See :func:`render_report`.
    """
    from hdp_spark.report.html import markdown_to_html

    text = render_report(out, job, runs, distribution, allocation=allocation)
    path = out / "report.md"
    atomic_write(path, (text + "\n").encode())
    html = markdown_to_html(text, base=out, title=f"Release report: {job.name}")
    atomic_write(out / "report.html", html.encode())
    return path
