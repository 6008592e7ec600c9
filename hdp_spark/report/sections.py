"""The sections of a release below its first screen: values (table and plots), privacy
levels, details."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hdp_spark.report.describe import (
    bias_of,
    fmt_half,
    fmt_value,
    half_of,
    half_unit,
    share_of,
    title_of,
    units_of,
)
from hdp_spark.report.fmt import fmt_count, fmt_num, fmt_pct, fmt_span, md_table
from hdp_spark.report.plots import plot_comparison, plot_estimates, plot_levels
from hdp_spark.report.summary import (
    CELL_KINDS,
    PERSON_KINDS,
    Cost,
    ValueRow,
    eps_label,
    eps_ranges,
    key_label,
    smallest_eps,
)
from hdp_spark.report.words import CHARGE, KIND_WORDS, NO_BASELINE, POLICY, method_words

if TYPE_CHECKING:
    from hdp_spark.jobs.results import ReleaseRun

__all__ = ["PUBLIC_ROWS", "Plots", "commit_time", "details_section", "levels_section",
           "public_label", "values_section"]


class Plots:
    def __init__(self, out: Path, enabled: bool) -> None:
        self.out, self.enabled = out, enabled

    def link(self, png: Path | None, alt: str) -> list[str]:
        if png is None:
            return []
        return [f"![{alt}]({png.relative_to(self.out).as_posix()})", ""]

    def path(self, release_id: str, name: str) -> Path:
        return self.out / "plots" / f"{release_id}__{name}.png"



def values_section(
    plots: Plots, rid: str, agg: dict[str, Any], values: list[ValueRow], by: list[str],
    level: str, rows: list[dict[str, Any]], n_aggs: int,
) -> list[str]:
    name = agg["name"]
    title = "### Values" if n_aggs == 1 else f"### Values of `{name}`"
    lines = [title, ""]
    if not values:
        return [*lines, "_No value was released._", ""]
    fv, fh = fmt_value(agg), fmt_half(agg)
    has_base = any(v.baseline is not None for v in values)
    first = ", ".join(by) if by else ("category" if agg["kind"] == "histogram" else "value")
    if agg["kind"] in PERSON_KINDS:
        first = " / ".join(agg["definition"]["cols"]) if agg["kind"] == "heavy_hitters" \
            else "marginal: values" if agg["kind"] in CELL_KINDS else "attribute / value"
    pm = "± (percentage points)" if units_of(agg) == "share" else "±"
    lo_bound, hi_bound = _bounds(agg)
    biased = any(v.bias > 0 for v in values)
    bound = f"{level} interval (noise + ε-weighting)" if biased else f"{level} interval"
    header = [first, "estimate", bound, pm, "± as share of the value"]
    if biased:
        header += ["of which: weighting rows by ε (worst case)"]
    mins = sorted({m for m in (smallest_eps(agg, [r]) for r in rows) if m is not None})
    base_eps = (f"ε = {eps_label(mins[0])}" if len(mins) == 1 else
                f"each group's smallest ε, {fmt_span(mins[0], mins[-1], eps_label)}"
                if mins else "")
    if has_base:
        header.append(f"± with one ε for all ({base_eps})")
    body = []
    lows = [v.low for v in values]
    highs = [v.high for v in values]
    for v in values:
        cells = [v.label, fv(v.estimate) + (" (fallback)" if v.fallback else ""),
                 f"{fv(v.low)} to {fv(v.high)}", fh(half_of(v)), fmt_pct(share_of(v))]
        if biased:
            cells += [fh(bias_of(v))]
        if has_base:
            cells.append(fh(v.baseline) if v.baseline is not None else "–")
        body.append(cells)
    lines += md_table(header, body)
    if biased:
        bias = [bias_of(v) for v in values if v.bias > 0]
        lines += ["", f"Each interval holds the table's own value with probability ≥ {level}, "
                  f"on any data: it covers the noise added for privacy and the worst-case "
                  f"effect of weighting rows by their ε (the 'of which' column, "
                  f"± {fmt_span(min(bias), max(bias), fh)}{half_unit(agg)}, a function of "
                  "ε only). It does not include sampling error."]
    else:
        lines += ["", f"The noise added for privacy stays inside the interval with probability "
                  f"≥ {level}; the interval does not include sampling error."]
    if not has_base:
        lines += [NO_BASELINE.get(agg["kind"], "")]
    else:
        lines += [f"The last column is the ± a library that gives everyone the same ε would "
                  f"publish: to respect every person's demand it must use the smallest ε of "
                  f"the group ({base_eps}) for every row."]
    lines.append("")
    if not plots.enabled:
        return lines
    what = title_of(agg, by)
    ylabel = _axis_label(agg)
    labels = [v.label for v in values]
    interval = "interval (noise + ε-weighting)" if biased else "interval"
    png = plot_estimates(
        plots.path(rid, name), labels,
        {name: ([v.estimate for v in values], lows, highs)},
        title=what, ylabel=ylabel, level=level, interval=interval)
    plural = "intervals (noise + ε-weighting)" if biased else "intervals"
    lines += plots.link(png, f"{what}, with {level} {plural}")
    if has_base:
        half = [v.baseline if v.baseline is not None else math.nan for v in values]
        base_lo = [max(v.estimate - h, lo_bound) for v, h in zip(values, half, strict=True)]
        base_hi = [min(v.estimate + h, hi_bound) for v, h in zip(values, half, strict=True)]
        png = plot_comparison(
            plots.path(rid, name + "__vs_single_eps"), labels, [v.estimate for v in values],
            (lows, highs), (base_lo, base_hi),
            title=f"{level} {interval}: this release vs one ε for everyone", ylabel=ylabel,
            level=level, interval=interval,
            baseline_label=f"one ε for all ({base_eps}): the {level} interval a single-ε\n"
                           "library would publish, drawn around this estimate")
        lines += plots.link(png, f"{level} {interval} of this release beside a single-ε "
                                 "library's")
    return lines


def _axis_label(agg: dict[str, Any]) -> str:
    """The value axis: what is plotted, with the unit the job declares (none claimed
    otherwise)."""
    unit = units_of(agg)
    if unit == "share":
        return "share of rows"
    if unit == "people":
        return "people"
    d = agg["definition"]
    column = d.get("column", d.get("report", agg["name"]))
    return f"average {column}" + (f" ({unit})" if unit else "")


def _bounds(agg: dict[str, Any]) -> tuple[float, float]:
    d = agg["definition"]
    if agg["kind"] == "histogram":
        return (0.0, math.inf if d.get("counts") else 1.0)
    return (float(d.get("lower", -math.inf)), float(d.get("upper", math.inf)))


PUBLIC_ROWS = "public rows (ε = ∞ in the data)"
"""The one wording of public rows throughout a report."""


def public_label(capped: str) -> str:
    """The ε-allowed label of the range that holds exactly the public rows."""
    return f"public: ∞ capped to {capped}"


def levels_section(
    plots: Plots, rid: str, cost: Cost, n_charging: int, public_rows: int = 0
) -> list[str]:
    """The privacy levels of a release: people per range of ε allowed, their charges, and
    a bar chart (public rows, ε = ∞ in the data, are said apart: they appear at the ε the
    budget allowed them)."""
    ranges = eps_ranges(cost)
    if public_rows and ranges and ranges[-1].users == public_rows:
        # the top range holds exactly the public rows: named as such in every release
        # (their ε, ∞ in the data, is capped to a budget that shrinks from release to
        # release), not by a number that changes
        top = ranges[-1]
        ranges[-1] = dataclasses.replace(top, label=public_label(top.label))
    summed = (f" Each of the release's {n_charging} aggregators may use up to a person's ε, "
              "so the ε allowed here is their sum." if n_charging > 1 else "")
    lines = ["### Privacy levels", "",
             "How much privacy people allowed this release (ε allowed, grouped into ranges) "
             f"and what they were charged.{summed}", ""]
    lines += md_table(
        ["ε allowed", "people", "ε charged", "got privacy for free"],
        [[r.label, fmt_count(r.users), fmt_span(r.charged_lo, r.charged_hi, eps_label),
          f"{fmt_count(r.free_users)} ({fmt_pct(r.free_users / max(r.users, 1))})"
          if r.free_users else "none"]
         for r in ranges],
    )
    lines.append("")
    if public_rows:
        lines += [f"{fmt_count(public_rows)} of these people are {PUBLIC_ROWS}, capped to "
                  "the budget: they are counted at the ε their budget allowed.", ""]
    if plots.enabled:
        png = plot_levels(plots.path(rid, "privacy_levels"), [r.label for r in ranges],
                          [r.users - r.free_users for r in ranges],
                          [r.free_users for r in ranges],
                          title="People per privacy level (ε allowed)")
        lines += plots.link(png, "people per privacy level")
    return lines


def commit_time(stamp: str) -> str:
    """A commit's time as the report prints it (UTC, to the second)."""
    try:
        when = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    return when.replace(microsecond=0).isoformat()


def details_section(
    run: ReleaseRun, aggs: list[dict[str, Any]], rows: list[dict[str, Any]], by: list[str],
    budget: dict[str, Any], out: Path, selection: dict[str, Any] | None = None,
    unit: dict[str, Any] | None = None,
) -> list[str]:
    when = commit_time(run.record.committed_at)
    commit = (f"Commit `{run.record.commit_id}` at {when}" if run.status == "committed" else
              f"Re-published from the commit of {when} (`{run.record.commit_id}`)")
    lines = ["### Details", "",
             f"{commit}; values in "
             f"`{(run.path / 'values.parquet').relative_to(out)}` and `values.json`. "
             f"Budget rule: over budget, {POLICY.get(budget['policy'], budget['policy'])}; "
             f"{CHARGE.get(str(budget.get('charge', 'effective')), '')}.", ""]
    if selection is not None:
        lines += [
            f"Partition selection: c = {fmt_num(selection['c'])}, δ = {selection['delta']:g}, "
            f"selection share f = {fmt_num(selection['share'])}, step γ = "
            f"{selection['step']:g}, neighbours: {selection['neighbours']}. A group is "
            "published only if its noisy weight (`_weight`, the noisy sum of its members' "
            "κ_i) reaches the threshold; each person's whole charge is κ_i for this release "
            "(a share f of it chooses the groups, the rest releases the statistics), and δ "
            "composes additively over releases (the ledger records it per release; it "
            "budgets ε only). Groups are listed in key order; the number of groups in the "
            "data and each group's row count are private and not shown.", ""]
    if unit is not None:
        lines += [
            f"Privacy unit `{unit['column']}`: at most {unit['max_groups']} group(s) per "
            f"person and {unit['max_rows']} row(s) per person and group, kept at random by "
            f"the release's key; each kept (person, group) spends the person's ε / "
            f"{unit['max_groups']} (at most {fmt_num(unit['eps_cap'])}), rounded down to "
            f"steps of {unit['step']:g}; a share {fmt_num(unit['weight_share'])} of it pays "
            "for the noisy weight (`_weight`) every statistic is divided by. Groups' row "
            "counts are private and not shown."
            + ("" if "delta" not in unit else
               f" Groups are selected privately (δ = {float(unit['delta']):g}, the margin "
               f"computed for δ / {unit['max_groups']}): a group is published only if its "
               "noisy weight reaches the threshold; the number of groups in the data is "
               "private and not shown."), ""]
    for a in aggs:
        name, kind, d = a["name"], a["kind"], a["definition"]
        method = d.get("method") if selection is None and unit is None else None
        lines += [f"- `{name}`: {KIND_WORDS.get(kind, kind)}"
                  + (f"; {method_words(method)}" if method else "") + "."]
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
              and selection is None and unit is None]
    for a in detail:
        name = a["name"]
        counted = "users" if a["kind"] == "user_mean" else (
            "reports" if a["kind"] == "ldp_mean" else "people")
        count_col = f"{name}_users" if a["kind"] == "user_mean" else f"{name}_n"
        header = [", ".join(by) if by else "group", counted]
        has_tau = a["kind"] == "mean"
        if has_tau:
            header.append("privacy-for-free threshold τ")
        header.append("estimated, or fallback to the middle")
        body = []
        for r in rows:
            cells: list[Any] = [key_label(r, by), fmt_count(_f0(r.get(count_col)))]
            if has_tau:
                cells.append(_tau(r.get(f"{name}_tau")))
            cells.append("fallback" if r.get(f"{name}_fallback") else "estimated")
            body.append(cells)
        if len(detail) > 1:
            lines += [f"`{name}`:", ""]
        lines += [*md_table(header, body), ""]
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
