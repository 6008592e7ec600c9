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
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hdp_spark.core.selection.spec import guarantee_words
from hdp_spark.ledger._fs import atomic_write
from hdp_spark.report.describe import accuracy_words, what_all
from hdp_spark.report.fmt import fmt_count, fmt_num, fmt_pct, fmt_span, md_table
from hdp_spark.report.plots import plot_remaining
from hdp_spark.report.sections import (
    PUBLIC_ROWS,
    Plots,
    commit_time,
    details_section,
    levels_section,
    values_section,
)
from hdp_spark.report.summary import (
    PERSON_KINDS,
    Cost,
    charge_classes,
    eps_label,
    release_cost,
    selection_classes,
    value_rows,
)
from hdp_spark.report.words import ALLOCATION, GLOSSARY_HEADING, POLICY, glossary

if TYPE_CHECKING:
    from hdp_spark.jobs.adapter import BudgetDistribution
    from hdp_spark.jobs.results import AllocationSummary, ReleaseRun
    from hdp_spark.jobs.spec import JobSpec

__all__ = ["GLOSSARY_HEADING", "render_report", "write_report"]


# -- the first screen of a release -------------------------------------------------------


def _public_words(n: int) -> str:
    """How the report names rows with ε = +∞ in the data (one wording throughout)."""
    return PUBLIC_ROWS if n != 1 else PUBLIC_ROWS.replace("rows", "row", 1)


def _cost_words(cost: Cost, budget: dict[str, Any], subject: str = "person") -> str:
    if not cost.users:
        return "nobody was charged"
    lo, med, hi = cost.charged
    if fmt_num(lo) == fmt_num(hi):
        text = f"each of the {fmt_count(cost.users)} people was charged {eps_label(lo)} ε"
    else:
        text = (f"each of the {fmt_count(cost.users)} people was charged between "
                f"{eps_label(lo)} and {eps_label(hi)} ε (median {eps_label(med)})")
    if cost.free_users and cost.saved is not None:
        s_lo, s_med, s_hi = cost.saved
        text += (f". **{fmt_count(cost.free_users)} of them "
                 f"({fmt_pct(cost.free_users / max(cost.users, 1))}) got privacy for free**: "
                 f"charged less than the ε they allowed, by "
                 f"{fmt_span(s_lo, s_hi, eps_label)} ε (median {eps_label(s_med)})")
    else:
        text += ". Nobody was charged less than the ε they allowed"
    capped, excluded = int(budget.get("users_capped", 0)), int(budget.get("users_excluded", 0))
    public = int(budget.get("public_rows", 0))
    if public and budget.get("policy") == "cap":
        capped = max(capped - public, 0)
        text += (f". {fmt_count(public)} {_public_words(public)}, capped to the budget they "
                 "had left")
    elif public and budget.get("policy") == "exclude":
        excluded = max(excluded - public, 0)
        text += (f". {fmt_count(public)} {_public_words(public)}, left out: the budget "
                 "cannot cover an unlimited ε (charged 0)")
    if capped:
        text += (f". {fmt_count(capped)} {'other ' if public else ''}people had their ε "
                 "lowered to the budget they had left")
    if excluded:
        text += (f". {fmt_count(excluded)} {'other ' if public else ''}people were left out "
                 "for lack of budget (charged 0)")
    text += (f". All charges added up: {fmt_num(cost.total)} ε over {fmt_count(cost.users)} "
             f"people — a total, not one {subject}'s loss")
    return text


def _budget_left(d: BudgetDistribution | None) -> str:
    if d is None or not d.remaining_quantiles:
        return "not computed"
    q = d.remaining_quantiles
    lo, med, hi = q.get(0.0, math.nan), q.get(0.5, math.nan), q.get(1.0, math.nan)
    none = (f"{fmt_count(d.exhausted)} of {fmt_count(d.users)} have none left" if d.exhausted
            else "nobody has run out")
    return (f"after this run, people have {fmt_span(lo, hi, eps_label)} ε left (median "
            f"{eps_label(med)}); {none} (all releases on this ledger, see the end of the "
            "report)")


# -- one release --------------------------------------------------------------------------


def _release_section(
    plots: Plots, run: ReleaseRun, job: JobSpec, dist: BudgetDistribution | None
) -> list[str]:
    outcome = run.record.outcome_data()
    by = list(outcome["by"])
    rows: list[dict[str, Any]] = outcome["rows"]
    aggs: list[dict[str, Any]] = outcome["aggregators"]
    budget: dict[str, Any] = outcome["budget"]
    charge_mode = str(budget.get("charge", "effective"))
    rid = run.release_id
    selection = outcome.get("selection")
    unit = outcome.get("privacy_unit")
    per_agg = {a["name"]: charge_classes(a, rows, by, charge_mode) for a in aggs}
    if selection is not None:  # κ_i charged once for the release, over the whole table
        per_agg = {"": selection_classes(outcome)}
    if unit is not None:  # once per person: no per-level row counts (private)
        per_agg = {}
    charging = [c for c in per_agg.values() if c is not None]
    cost = release_cost(charging)
    values = {a["name"]: value_rows(a, rows, by) for a in aggs}
    betas = {float(a["definition"].get("beta", 0.05)) for a in aggs}
    level = " / ".join(f"{1 - b:.0%}" for b in sorted(betas, reverse=True)) or "95%"

    lines = [f"## Release `{rid}`", ""]
    charged = any(c is not None for c in per_agg.values()) or (
        unit is not None and int(budget.get("users_charged", 0)) > 0)
    engine = outcome.get("engine")
    by_engine = f" by engine {engine}" if engine else ""
    status = ((f"computed{by_engine} and charged in this run" if charged else
               f"computed{by_engine} in this run; nothing charged")
              if run.status == "committed" else
              f"re-published from the commit of {commit_time(run.record.committed_at)} "
              f"(computed then{by_engine}; nothing charged now)")
    lines += [f"_{status[:1].upper()}{status[1:]}._", ""]
    selected = selection is not None or (unit is not None and "delta" in unit)
    what = what_all(aggs, by, len(rows), selected)
    lines += [f"- **What:** {what}."]
    if selection is not None:
        lines += [f"- **Guarantee:** {guarantee_words(selection)}."]
    if unit is not None:
        lines += _unit_lines(unit, budget, run.status == "committed")
    if cost is not None:
        allowed = [(a, u) for _, _, u, a, _ in cost.classes if u]
    else:  # aggregators on other ε levels: the people of the first one that reads rows
        allowed = next(([(c.eps, c.users) for c in cl if c.users] for cl in charging
                        if any(c.users for c in cl)), [])
    users = sum(u for _, u in allowed)
    if selection is not None and allowed:
        lo, hi = min(a for a, _ in allowed), max(a for a, _ in allowed)
        whom = (f"{fmt_count(users)} people, all of them read by the selection whether or not "
                f"their group was published, with ε from {eps_label(lo)} to {eps_label(hi)} "
                "(after capping at c and to their budget)")
    elif charging and not allowed:
        whom = "nobody: no row of the input falls in the release's public groups"
    elif allowed:
        lo, hi = min(a for a, _ in allowed), max(a for a, _ in allowed)
        whom = (f"{fmt_count(users)} people, each with their own privacy level ε from "
                f"{eps_label(lo)} to {eps_label(hi)} (the ε they allowed for this release, "
                "after capping to their budget)" if eps_label(lo) != eps_label(hi) else
                f"{fmt_count(users)} people, all at the same privacy level ε = {eps_label(lo)} "
                "for this release")
        public = int(budget.get("public_rows", 0))
        if public:
            whom += (f"; {fmt_count(public)} of them are {_public_words(public)}, capped to "
                     "the budget" if budget.get("policy") == "cap" else
                     f"; {fmt_count(public)} {_public_words(public)} were left out (see Cost)")
    else:
        reports = sum(int(lv.get("n") or 0) for a in aggs for r in rows
                      for lv in (r.get(f"{a['name']}_eps_levels") or []))
        whom = (f"{fmt_count(reports)} device reports, each randomized with its own ε before "
                "it was sent")
    if unit is None:
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
        lines += [f"- **Accuracy{prefix}:** {accuracy_words(a, values[a['name']], level)}."]
    when = "" if run.status == "committed" else (
        " (charged once, when it was first computed; nothing now)")
    if unit is not None:
        pass  # said by _unit_lines
    elif cost is not None:
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
        lines += values_section(plots, rid, a, values[a["name"]], by, level, rows, len(aggs))
    if cost is not None and cost.users:
        public = int(budget.get("public_rows", 0)) if budget.get("policy") == "cap" else 0
        lines += levels_section(plots, rid, cost, len(charging), public)
    lines += details_section(run, aggs, rows, by, budget, plots.out, selection, unit)
    return lines


def _unit_lines(unit: dict[str, Any], budget: dict[str, Any], now: bool) -> list[str]:
    """Guarantee, people and cost of a release under a privacy unit (public facts: the
    bounds and the ledger's totals; never a row count)."""
    g, r = int(unit["max_groups"]), int(unit["max_rows"])
    users = int(budget.get("users_charged", 0))
    total, most = float(budget.get("eps_charged_total", 0.0)), float(
        budget.get("eps_charged_max", 0.0))
    when = "" if now else " (charged once, when it was first computed; nothing now)"
    chosen = [] if "delta" not in unit else [
        f"- **Groups:** chosen privately: a group is published only if its noisy total "
        f"weight reaches a threshold, so small groups are left out; δ = "
        f"{float(unit['delta']):g} bounds the chance that any group holding one person "
        "alone is published (all of their groups together)."]
    return [*chosen,
        f"- **Guarantee:** each person (all rows with the same `{unit['column']}`) is "
        f"protected with their own ε for this release, however many rows they have: at "
        f"most {g} group{'s' if g != 1 else ''} and {r} row{'s' if r != 1 else ''} per "
        f"group of theirs are read, chosen at random, each group spending their ε / {g}.",
        f"- **For whom:** {fmt_count(users)} people, each counted once.",
        f"- **Cost{when}:** each person was charged once, at most their ε: "
        f"{eps_label(total)} ε in total, at most {eps_label(most)} for one person.",
    ]


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
    draw = Plots(out, plots and _has_matplotlib())
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    src = (_shown_path(job, job.input.path) if job.input.path is not None
           else f"table `{job.input.table}`")
    budget = []
    if job.budget.default is not None:
        budget.append(f"{fmt_num(job.budget.default)} ε per person in total")
    if job.budget.column is not None:
        budget.append(f"per person from column `{job.budget.column}`")
    lines = [
        f"# Release report: `{job.name}`",
        "",
        *([job.description, ""] if job.description else []),
        "Releases in this run:",
        "",
        *[f"- [{r.release_id}](#release-{r.release_id.lower()}) — "
          + what_all(r.record.outcome_data()["aggregators"], r.record.outcome_data()["by"],
                      len(r.record.outcome_data()["rows"]),
                      "selection" in r.record.outcome_data()
                      or "delta" in r.record.outcome_data().get("privacy_unit", {}))
          for r in runs],
        "",
        *md_table(
            ["setting", "value"],
            [
                ["run at (UTC)", now],
                ["engine of this run", _engines(job, runs)],
                ["input", src],
                ["ledger", f"{job.ledger_backend}: {_shown_path(job, job.ledger.path)}"],
                ["privacy budget", f"{'; '.join(budget)}, across all releases on this "
                 f"ledger; over budget, {POLICY.get(job.budget.policy, job.budget.policy)}"],
                ["budget allocation", ALLOCATION.get(job.budget.allocation,
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
    lines += ["## Budget left after this run", "", _budget_sentence(d), ""]
    if not draw.enabled and d.hist_counts:  # no plot: the histogram as a short table
        lines += [*md_table(["ε left (per person)", "people"], [
            [f"{eps_label(a)} to {eps_label(b)}", fmt_count(n)]
            for a, b, n in zip(d.hist_edges, d.hist_edges[1:], d.hist_counts, strict=False)
            if n]), ""]
    if draw.enabled and d.hist_counts:
        png = plot_remaining(out / "plots" / "remaining_budget.png", d.hist_edges,
                             d.hist_counts)
        lines += draw.link(png, "privacy budget left per person")
    if plots and not draw.enabled:
        lines += ["_Plots skipped: install matplotlib to get them._", ""]
    lines += glossary("\n".join(lines))
    return "\n".join(lines)


def _shown_path(job: JobSpec, path: Path) -> str:
    """A local path as the report may show it (Markdown): relative to the job file when it
    is near it (under the job file's directory or its parent), else the file name only
    (the page is sent as it is: no absolute path of the machine that ran the job)."""
    if job.source is not None:
        rel = Path(os.path.relpath(path, job.source.parent))
        if rel.parts[:2] != ("..", ".."):
            return f"`{rel.as_posix()}` (relative to the job file)"
    return f"`{path.name}`"


def _engines(job: JobSpec, runs: Sequence[ReleaseRun]) -> str:
    """The engine of this run, and the engines that computed re-published releases."""
    earlier = sorted({r.computed_by for r in runs
                      if r.status == "republished" and r.computed_by != job.engine})
    if not earlier:
        return job.engine
    return (f"{job.engine} (releases re-published from earlier runs were computed by "
            f"{', '.join(earlier)}: each release says which engine computed it)")


def _budget_sentence(d: BudgetDistribution) -> str:
    """The budget left after the run in words: who has run out, the median, the range."""
    q, s = d.remaining_quantiles, d.spent_quantiles
    lo, med, hi = q.get(0.0, math.nan), q.get(0.5, math.nan), q.get(1.0, math.nan)
    out = (f"{fmt_count(d.exhausted)} of the {fmt_count(d.users)} people in the input have "
           "no budget left" if d.exhausted else
           f"None of the {fmt_count(d.users)} people in the input has run out of budget")
    return (f"{out}. Half of them have at least {eps_label(med)} ε left; everyone has between "
            f"{eps_label(lo)} and {eps_label(hi)} ε left, having spent "
            f"{fmt_span(s.get(0.0, math.nan), s.get(1.0, math.nan), eps_label)} ε so far on "
            "this ledger. The histogram shows how many people have how much left.")


def _allocation_lines(allocation: AllocationSummary | None) -> list[str]:
    """The shares of the run's budget allocation and the predicted error of each method."""
    if allocation is None or not allocation.shares:
        return []
    errors = ", ".join(f"{m} {fmt_num(e)}" for m, e in sorted(allocation.errors.items()))
    return [
        f"Budget allocation ({allocation.method}): the share of each person's remaining "
        "budget each release computed in this run could use, chosen from the public ε "
        "values, budgets and release weights before anything was computed.",
        "",
        *md_table(["release", "share"],
                [[rid, fmt_num(share)] for rid, share in allocation.shares.items()]),
        "",
        f"Weighted predicted error (noise variance / range², summed over groups): {errors}.",
        "",
    ]


def _has_matplotlib() -> bool:
    """Whether matplotlib is installed, without importing it (~0.3 s): a re-run whose plots
    are all drawn already never imports it."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


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
