"""How ``hdp-release plan`` shows a budget plan: the text table, the plot, the user table.

Numbers are formatted by the report's rules (:mod:`hdp_spark.report.fmt`: the same dashes
for "no value" and the same infinity sign as the report); the plan's table is plain text
with aligned columns (:func:`~hdp_spark.report.fmt.text_table`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.aggregators.registry import aggregator_of
from hdp_spark.core.ledger import UNIT
from hdp_spark.jobs.allocation import Allocation, AllocationMethod
from hdp_spark.jobs.budget_plan import JobBudgetPlan
from hdp_spark.jobs.job_model import ALLOCATED_KINDS
from hdp_spark.report.fmt import fmt_num, text_table

__all__ = ["render_plan", "write_plan_plot", "write_user_table"]

_NONE = fmt_num(None)
"""A cell without a value (the report's dash)."""


def _key_text(key: Sequence[object]) -> str:
    return "/".join(str(k) for k in key) if key else "all"


def _weighted_quantiles(values: np.ndarray[Any, Any], counts: np.ndarray[Any, Any],
                        qs: Sequence[float]) -> list[float]:
    if counts.sum() == 0:
        return [math.nan for _ in qs]
    order = np.argsort(values, kind="stable")
    v, c = values[order], np.cumsum(counts[order])
    total = c[-1]
    return [float(v[min(int(np.searchsorted(c, q * total, side="left")), len(v) - 1)])
            for q in qs]


_MAX_CLASSES = 10


def _charge_classes(plan: JobBudgetPlan, r: int, alloc: Allocation) -> list[list[str]]:
    """Users of a release by the ε they are allowed (after the cap) and their charge; at
    most ten lines (ranges of ε once there are more distinct levels)."""
    o = alloc.simulation.releases[r]
    inside = (plan.profile.groups[r] >= 0) & (plan.profile.counts > 0)
    allowed = o.allowed[inside]
    counts = plan.profile.counts[inside]
    charged = o.charges[inside].astype(np.float64) * UNIT
    if not len(allowed):
        return []
    levels = np.unique(allowed)
    if len(levels) <= _MAX_CLASSES:
        which = np.searchsorted(levels, allowed)
    else:  # ranges holding about a tenth of the users each
        tops = np.unique(np.asarray(_weighted_quantiles(
            allowed, counts, [i / _MAX_CLASSES for i in range(1, _MAX_CLASSES + 1)])))
        which = np.minimum(np.searchsorted(tops, allowed, side="left"), len(tops) - 1)
    out = []
    for b in np.unique(which):
        sel = which == b
        n = int(counts[sel].sum())
        if not n:
            continue
        lo, hi = float(allowed[sel].min()), float(allowed[sel].max())
        c = charged[sel]
        label = fmt_num(lo) if lo == hi else f"{fmt_num(lo)}-{fmt_num(hi)}"
        charge = fmt_num(float(c.min())) if c.min() == c.max() else \
            f"{fmt_num(float(c.min()))}-{fmt_num(float(c.max()))}"
        out.append([label, f"{n:,}", charge, fmt_num(float((c * counts[sel]).sum()))])
    return out


def _budget_state(plan: JobBudgetPlan, alloc: Allocation) -> list[str]:
    p = plan.profile
    start, end = p.remaining, alloc.simulation.remaining
    n = p.counts
    exhausted = int(n[end == 0].sum())
    untouched = int(n[(end == start) & (end > 0)].sum())
    partly = int(n.sum()) - exhausted - untouched
    q = _weighted_quantiles(end.astype(np.float64) * UNIT, n, (0.0, 0.5, 1.0))
    q0 = _weighted_quantiles(start.astype(np.float64) * UNIT, n, (0.0, 0.5, 1.0))
    return [
        f"  remaining budget before: min {fmt_num(q0[0])}, median {fmt_num(q0[1])}, "
        f"max {fmt_num(q0[2])}",
        f"  remaining budget after:  min {fmt_num(q[0])}, median {fmt_num(q[1])}, "
        f"max {fmt_num(q[2])}",
        f"  users untouched {untouched:,}, partly spent {partly:,}, exhausted {exhausted:,}",
    ]


def render_plan(plan: JobBudgetPlan) -> str:
    """The plan as a readable text table (its size does not grow with the users)."""
    job = plan.job
    lines = [
        f"plan of job {job.name}: {plan.users:,} user(s), "
        f"{len(plan.releases) + len(plan.committed)} release(s); "
        f"budget policy {job.budget.policy}, charge {job.budget.charge}, allocation "
        f"{plan.chosen}",
        "nothing is charged; the ledger is read, never written",
        "",
        *(f"release {rid}: committed: re-published, charges nothing" for rid in
          plan.committed),
        *(["", "a run would compute nothing and charge nothing: every release is committed"]
          if plan.committed and not plan.releases else
          ["", f"predicted below: the {len(plan.releases)} release(s) a run would compute and "
           "charge"] if plan.committed else []),
        *([""] if plan.committed else []),
    ]
    if not plan.releases:
        state = _budget_state(plan, plan.selected)
        now = state[0].replace("remaining budget before:", "remaining budget now:")
        return "\n".join([*lines, "budgets (a run leaves them as they are):", now]) + "\n"
    lines += [
        "allocation methods side by side (share = part of each user's budget left at the "
        "start a release may use; error = weight x predicted variance / range^2):",
    ]
    methods: list[AllocationMethod] = ["sequential", "equal", "optimal"]
    header = ["release", "weight", *(f"{m} share" for m in methods),
              *(f"{m} error" for m in methods)]
    rows = []
    for r, rel in enumerate(plan.releases):
        outs = [plan.allocations[m].simulation.releases[r] if m in plan.allocations else None
                for m in methods]
        rows.append([rel.id, fmt_num(rel.weight),
                     *("n/a" if o is None else fmt_num(o.share) for o in outs),
                     *("n/a" if o is None else "refused" if o.refused
                       else "not run" if not o.ran
                       else _NONE if rel.persons
                       else fmt_num(rel.weight * o.error) for o in outs)])
    rows.append(["total", "", *("" for _ in methods),
                 *(fmt_num(plan.allocations[m].error) if m in plan.allocations else "n/a"
                   for m in methods)])
    lines += ["  " + x for x in text_table(header, rows)]
    if len(plan.allocations) < len(methods):
        kinds = sorted({a.kind for rel in job.releases for a in rel.aggregators
                        if a.kind not in ALLOCATED_KINDS})
        kinds += ["a release under select_keys"] if any(
            rel.selection is not None for rel in job.releases) else []
        lines.append(f"  n/a: 'equal' and 'optimal' allocate only {', '.join(ALLOCATED_KINDS)}"
                     f" releases with public keys (this job has {', '.join(kinds)}); "
                     "sequential shown")
    if any(rel.persons for rel in plan.releases):
        lines.append("  -: no predicted variance enters the error of the partial-DP "
                     "releases (see their accuracy below)")
    if any(rel.users for rel in plan.releases):
        lines += ["  user_mean half_width: a bound of its final noise's ± (noise_ci_*);",
                  "  its released ci_low/ci_high add bias_bound, set by its first steps"]
    alloc = plan.selected
    lines += ["", f"predicted accuracy and charges with the job's allocation ({plan.chosen}):"]
    for r, rel in enumerate(plan.releases):
        o = alloc.simulation.releases[r]
        lines.append("")
        lines.append(f"release {rel.id} (share {fmt_num(o.share)}, weight {fmt_num(rel.weight)})")
        if o.refused:
            lines.append(f"  refused: {o.users_over:,} user(s) lack budget "
                         "(`[budget] policy` = 'fail'); later releases do not run")
            continue
        if not o.ran:
            lines.append("  not run (an earlier release is refused)")
            continue
        acc = []
        for key, name, e in o.explained:
            acc.append([_key_text(key), name, f"{e.n:,}", fmt_num(e.half_width),
                        fmt_num(e.bias_bound),
                        fmt_num(e.baseline_half_width if e.baseline_half_width is not None
                             else math.nan),
                        fmt_num(e.noise_scale), "yes" if e.fallback else "no",
                        f"{e.free_rows:,}", "exact"])
        preds = plan.predictions[r] if plan.predictions else ()
        for p in preds:
            acc.append([_key_text(p.key), p.name, f"{p.n:,}", fmt_num(p.half_width), _NONE,
                        _NONE, fmt_num(p.noise_scale), "yes" if p.fallback else "no", _NONE,
                        p.basis if p.basis != "none" else "no prediction"])
        if acc or rel.unit is None:
            lines += ["  " + x for x in text_table(
                ["group", "aggregator", "n", "half_width", "of which ε-weighting", "baseline",
                 "noise_scale", "fallback", "free_rows", "prediction"], acc)]
        if rel.unit is not None:
            lines += _unit_lines(rel)
        if o.explained:
            lines.append("  half_width: the released (1 − β) interval's ±, noise + the worst-case "
                         "effect of weighting rows by their ε ('of which': bias_bound)")
        for p in preds:
            if p.note:
                lines.append(f"  {p.name}: {p.note}")
        lines += [f"  {line}" for line in _auto_lines(o.explained)]
        if rel.free:
            lines.append(f"  {', '.join(rel.free)}: LDP aggregation, charges nothing (the "
                         "reports were paid for on the devices)")
        classes = _charge_classes(plan, r, alloc)
        lines.append(f"  users capped or excluded by the budget: {o.users_over:,}")
        if not o.charges_exact:
            lines.append("  charges are upper bounds: a user-level mean's final step charges "
                         "eps_effective <= ε, data-dependent (exact with charge mode "
                         "'demand' or one ε level per group)")
        lines += ["  " + x for x in text_table(
            ["ε allowed", "users", "charge each", "ε total"], classes)]
    lines += ["", "budgets after the job:", *_budget_state(plan, alloc)]
    return "\n".join(lines) + "\n"


def _unit_lines(rel: Any) -> list[str]:
    """A release under a privacy unit: its groups' weights are private, so the plan shows
    the noise interval's half-width per public group weight W (``explain``'s figures)."""
    from hdp_spark.explain_unit import WEIGHT_LADDER, select_figures, unit_figures

    specs = rel.unit.aggregators
    figures = unit_figures([spec for _, spec in specs], rel.unit.selection)
    shown = [i for i, w in enumerate(WEIGHT_LADDER) if 100 <= w <= 10_000]
    rows = [[name, *(f"{fmt_num(fig[-1][i]['central_half_width'])} "
                     f"(<= {fmt_num(fig[-1][i]['half_width'])})" for i in shown)]
            for (name, _), fig in zip(specs, figures, strict=True)]
    header = ["aggregator", *(f"W = {WEIGHT_LADDER[i]:,.0f}" for i in shown)]
    lines = ["  privacy unit: n and the ε histogram are private, so the accuracy depends on",
             "  a group's weight W (ε units; about its persons when each has ε >= max_groups",
             "  × eps_cap and max_rows rows there). Noise interval's ± at W, typical (bound):",
             *("  " + x for x in text_table(header, rows))]
    sel = rel.unit.selection
    if not sel.keys_public:  # select_keys: the threshold and its chance, public figures
        delta, threshold, _, chance = select_figures(sel)
        lines += [f"  select_keys: a group is published iff its noisy weight reaches "
                  f"{fmt_num(threshold)} (δ = {delta:g}; one person alone: <= δ/"
                  f"{sel.max_groups}); chance at "
                  + ", ".join(f"W = {c['weight']:,.0f}: {fmt_num(c['probability'])}"
                              for c in chance if 10 <= c["weight"] <= 1_000)]
    return lines


def _auto_lines(explained: Any) -> list[str]:
    """One line per group and ``method="auto"`` aggregator: the choice, its predicted
    worst-case RMSE and the runner-up's (functions of the public ε histogram)."""
    out = []
    for key, name, e in explained:
        if not e.candidates:
            continue
        ranked = sorted(e.candidates, key=lambda c: c[1])
        runner = next((c for c in ranked if c[0] != e.method), None)
        tail = f"; runner-up {runner[0]} {fmt_num(runner[1])}" if runner else ""
        out.append(f"{name} {_key_text(key)}: auto chose {e.method} (predicted worst-case "
                   f"RMSE {fmt_num(e.predicted_rmse)}{tail})")
    return out


def write_plan_plot(plan: JobBudgetPlan, path: Path) -> Path | None:
    """A PNG of the predicted interval half-widths of every (release, group, aggregator)
    against the homogeneous baseline (every row at the group's smallest ε), with the job's
    allocation; None when matplotlib is missing.

    Half-widths are divided by the aggregator's output range so that means and histograms
    share one axis.
    """
    from hdp_spark.report.plots import plot_plan_widths

    labels, ours, base = [], [], []
    alloc = plan.selected
    preds = plan.predictions or tuple(() for _ in plan.releases)
    for rel, o, pr in zip(plan.releases, alloc.simulation.releases, preds, strict=True):
        specs = dict(rel.aggregators)
        single = len(rel.aggregators) + len(rel.users) + len(rel.free) == 1
        for key, name, e in o.explained:
            spec = specs[name]
            low, high = aggregator_of(spec).output_range(spec)
            span = high - low
            labels.append(f"{rel.id}: {_key_text(key)}" if single
                          else f"{rel.id}: {_key_text(key)} {name}")
            ours.append(e.half_width / span)
            base.append(math.nan if e.baseline_half_width is None
                        else e.baseline_half_width / span)
        for p in pr:  # user-level means and LDP (bounds); partial-DP counts have no range
            if math.isfinite(p.span) and math.isfinite(p.half_width):
                labels.append(f"{rel.id}: {_key_text(p.key)}" if single
                              else f"{rel.id}: {_key_text(p.key)} {p.name}")
                ours.append(p.half_width / p.span)
                base.append(math.nan)
    return plot_plan_widths(path, labels, ours, base,
                            title=f"Predicted accuracy of job {plan.job.name} "
                                  f"({plan.chosen} allocation)")


def write_user_table(plan: JobBudgetPlan, path: Path) -> Path:
    """The per-user table (CSV): user id, remaining budget before, the charge of each
    release and the remaining budget after, with the job's allocation.

    Privacy:
        Ties user ids to budgets: for the operator, like the ledger; never publish it.
    """
    alloc = plan.selected
    rows = plan.user_rows
    data: dict[str, Any] = {
        "user_id": plan.user_ids,
        "remaining_before": plan.profile.remaining[rows].astype(np.float64) * UNIT,
    }
    for rel, o in zip(plan.releases, alloc.simulation.releases, strict=True):
        data[f"charge_{rel.id}"] = o.charges[rows].astype(np.float64) * UNIT
    data["remaining_after"] = alloc.simulation.remaining[rows].astype(np.float64) * UNIT
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(data).to_csv(path, index=False, float_format="%.17g")
    return path
