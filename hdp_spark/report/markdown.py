"""The Markdown report of a job run (with PNG plots when matplotlib is installed).

Everything in the report is either a released (noisy) value, its accuracy metadata, or a
function of the ε vectors and budgets, which are public in this model; validation counts
and user ids never appear.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hdp_spark.ledger._fs import atomic_write
from hdp_spark.report.plots import plot_estimates, plot_remaining

if TYPE_CHECKING:
    from hdp_spark.jobs.engines import BudgetDistribution
    from hdp_spark.jobs.runner import ReleaseRun
    from hdp_spark.jobs.spec import JobSpec

__all__ = ["render_report", "write_report"]


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


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table; numbers formatted by :func:`_num`."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_num(c) if not isinstance(c, str) else c for c in r) + " |"
            for r in rows]
    return out


def _key_label(row: dict[str, Any], by: Sequence[str]) -> str:
    return ", ".join(str(row.get(c)) for c in by) if by else "all"


def _release_section(out: Path, run: ReleaseRun, plots: bool) -> list[str]:
    outcome = run.record.outcome_data()
    by = list(outcome["by"])
    rows: list[dict[str, Any]] = outcome["rows"]
    status = "committed in this run" if run.status == "committed" else (
        "committed earlier, re-published (nothing charged now)")
    lines = [
        f"## Release `{run.release_id}`",
        "",
        f"Commit `{run.record.commit_id}` at {run.record.committed_at}: {status}. "
        f"Values: `{(run.path / 'values.parquet').relative_to(out)}` and `values.json`.",
        "",
    ]
    for agg in outcome["aggregators"]:
        special = _KIND_SECTIONS.get(agg["kind"])
        if special is not None:
            lines += special(out, run, agg, rows, by, plots)
            continue
        name = agg["name"]
        beta = float(agg["definition"].get("beta", 0.05))
        method = agg["definition"].get("method")
        intervals = _intervals(agg)
        lines += [f"### `{name}` ({agg['kind']}{', ' + method if method else ''})", ""]
        single = len(intervals) == 1
        header = [*(by or ["group"])]
        if single:
            header += ["estimate", f"{1 - beta:.0%} noise interval"]
        else:
            header += [f"`{label}` [interval]" for label, *_ in intervals]
        header += ["rows", "τ", "fallback"]
        body = []
        for r in rows:
            cells: list[Any] = [*(str(r.get(c)) for c in by), *([] if by else ["all"])]
            for _label, est, low, high in intervals:
                interval = f"[{_num(r.get(low))}, {_num(r.get(high))}]"
                cells += [r.get(est), interval] if single else [
                    f"{_num(r.get(est))} {interval}"]
            cells += [r.get(f"{name}_n"), r.get(f"{name}_tau"), r.get(f"{name}_fallback")]
            body.append(cells)
        lines += _table(header, body)
        lines += [
            "",
            f"Intervals hold the noise with probability ≥ {1 - beta:.0%}; they do not include "
            "sampling error.",
            "",
        ]
        if plots and intervals:
            png = plot_estimates(
                out / "plots" / f"{run.release_id}__{name}.png",
                [_key_label(r, by) for r in rows],
                {label: ([r.get(est) for r in rows], [r.get(low) for r in rows],
                         [r.get(high) for r in rows])
                 for label, est, low, high in intervals},
                title=f"{run.release_id}: {name}",
            )
            if png is not None:
                lines += [f"![{name}]({png.relative_to(out).as_posix()})", ""]
        lines += _levels_section(name, rows, by, outcome.get("tau", {}).get(name))
    b = outcome["budget"]
    lines += [
        "### Budget consumed",
        "",
        *_table(
            ["policy", "charge", "rows in release", "users charged", "ε charged (total)",
             "ε charged (max per user)", "users capped", "users excluded"],
            [[b["policy"], b.get("charge", "effective"), b["rows_in_release"],
              b["users_charged"], b["eps_charged_total"],
              b["eps_charged_max"], b["users_capped"], b["users_excluded"]]],
        ),
        "",
        _charge_note({a["kind"] for a in outcome["aggregators"]}),
        "",
    ]
    return lines


def _charge_note(kinds: set[str]) -> str:
    notes = []
    if kinds & {"mean", "histogram"}:
        notes.append("row-level kinds charge each user the effective ε of their row (weight "
                     "/ noise scale, at most their capped demand)")
    if "user_mean" in kinds:
        notes.append("the user-level mean charges each user ONCE (not per row) the largest "
                     "effective ε of the classes of their ε level")
    if kinds & {"heavy_hitters", "attribute_histograms"}:
        notes.append("partial-DP kinds charge every person read the per-person ε of their "
                     "report; persons without that much budget are left out (charged 0)")
    if "ldp_mean" in kinds:
        notes.append("LDP aggregation charges nothing (post-processing of reports randomized "
                     "on the devices)")
    return ("Charges per aggregator: " + "; ".join(notes) + ". Charges add up across "
            "aggregators and releases (sequential composition).")


def _plot(out: Path, run: ReleaseRun, name: str, labels: list[str],
          series: dict[str, tuple[list[Any], list[Any], list[Any]]]) -> list[str]:
    png = plot_estimates(out / "plots" / f"{run.release_id}__{name}.png", labels, series,
                         title=f"{run.release_id}: {name}")
    return [f"![{name}]({png.relative_to(out).as_posix()})", ""] if png is not None else []


def _estimate_rows(
    rows: list[dict[str, Any]], by: list[str], name: str, extra: Sequence[str]
) -> list[list[Any]]:
    body = []
    for r in rows:
        cells: list[Any] = [_key_label(r, by), r.get(name),
                            f"[{_num(r.get(name + '_ci_low'))}, {_num(r.get(name + '_ci_high'))}]"]
        cells += [r.get(name + suffix) for suffix in extra]
        body.append(cells)
    return body


def _user_mean_section(out: Path, run: ReleaseRun, agg: dict[str, Any],
                       rows: list[dict[str, Any]], by: list[str], plots: bool) -> list[str]:
    name = agg["name"]
    beta = float(agg["definition"].get("beta", 0.05))
    lines = [f"### `{name}` (user-level mean, seed 002)", "",
             "Protected unit: one user with all their rows (user-level DP); each user loses "
             "at most their ε.", ""]
    lines += _table(["group", "estimate", f"{1 - beta:.0%} noise interval", "users", "rows",
                     "fallback"],
                    _estimate_rows(rows, by, name, ("_users", "_rows", "_fallback")))
    lines.append("")
    if plots:
        lines += _plot(out, run, name, [_key_label(r, by) for r in rows],
                       {name: ([r.get(name) for r in rows], [r.get(name + "_ci_low") for r in rows],
                               [r.get(name + "_ci_high") for r in rows])})
    body = [[_key_label(r, by), c["step"], c["k"], c["eps"], c["users"], c["eps_effective"]]
            for r in rows for c in (r.get(name + "_classes") or [])]
    lines += [f"#### Privacy per class (`{name}`)", ""]
    lines += _table(["group", "step", "rows per user", "ε level", "users", "effective ε"], body)
    lines += ["", "The ledger charges each user once the largest effective ε of the classes "
              "with their group and ε level (an upper bound of their loss, ≤ their ε).", ""]
    return lines


def _records_label(record: dict[str, Any], cols: Sequence[str]) -> str:
    return " / ".join("other" if record.get(c) is None else str(record.get(c)) for c in cols)


def _partial_section(out: Path, run: ReleaseRun, agg: dict[str, Any],
                     rows: list[dict[str, Any]], by: list[str], plots: bool) -> list[str]:
    name = agg["name"]
    row = rows[0] if rows else {}
    records: list[dict[str, Any]] = row.get(f"{name}_records") or []
    if agg["kind"] == "heavy_hitters":
        title, cols = "heavy hitters, partial DP, seed 004", list(agg["definition"]["cols"])
    else:
        title, cols = "attribute histograms, partial DP, seed 004", ["attribute", "value"]
    beta = float(agg["definition"].get("beta", 0.05))
    lines = [
        f"### `{name}` ({title})", "",
        f"Per attribute ε₀ = {_num(row.get(f'{name}_eps0'))} (delivered "
        f"{_num(row.get(f'{name}_eps_attribute'))}); per person (whole record) "
        f"ε = {_num(row.get(f'{name}_eps_person'))}: "
        f"{row.get(f'{name}_eps_person_conversion', '')}. Persons read: "
        f"{_num(row.get(f'{name}_n'))}. Every person read is charged the per-person ε.",
        "",
    ]
    body = [[*(_num(r.get(c)) if r.get(c) is not None else "other" for c in cols),
             r.get("noisy_count"), f"[{_num(r.get('count_ci_low'))}, "
             f"{_num(r.get('count_ci_high'))}]"] for r in records]
    lines += _table([*cols, "noisy count", f"{1 - beta:.0%} noise interval"], body)
    if not records:
        lines.append("_No record was released._")
    lines.append("")
    if plots and records:
        lines += _plot(out, run, name, [_records_label(r, cols) for r in records],
                       {"count": ([r.get("noisy_count") for r in records],
                                  [r.get("count_ci_low") for r in records],
                                  [r.get("count_ci_high") for r in records])})
    return lines


def _ldp_section(out: Path, run: ReleaseRun, agg: dict[str, Any],
                 rows: list[dict[str, Any]], by: list[str], plots: bool) -> list[str]:
    name = agg["name"]
    beta = float(agg["definition"].get("beta", 0.05))
    lines = [f"### `{name}` (LDP aggregation, seed 003)", "",
             "Post-processing of reports already randomized on the devices (declared "
             "`already_randomized`): it adds no noise and **charges nothing**; each report "
             "spent its ε when the device randomized it.", ""]
    lines += _table(["group", "estimate", f"{1 - beta:.0%} interval (sampling and LDP noise)",
                     "reports", "fallback"],
                    _estimate_rows(rows, by, name, ("_n", "_fallback")))
    lines.append("")
    if plots:
        lines += _plot(out, run, name, [_key_label(r, by) for r in rows],
                       {name: ([r.get(name) for r in rows], [r.get(name + "_ci_low") for r in rows],
                               [r.get(name + "_ci_high") for r in rows])})
    body = [[_key_label(r, by), lv.get("eps"), lv.get("n"), lv.get("weight")]
            for r in rows for lv in (r.get(name + "_eps_levels") or [])]
    lines += [f"#### Reports per ε level (`{name}`)", ""]
    lines += _table(["group", "ε", "reports", "weight"], body)
    lines.append("")
    return lines


_KIND_SECTIONS = {
    "user_mean": _user_mean_section,
    "heavy_hitters": _partial_section,
    "attribute_histograms": _partial_section,
    "ldp_mean": _ldp_section,
}


def _intervals(agg: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in agg.get("intervals", [])]


def _levels_section(
    name: str, rows: list[dict[str, Any]], by: list[str], tau: list[Any] | None
) -> list[str]:
    col = f"{name}_eps_levels"
    if not rows or col not in rows[0]:
        return []
    body: list[list[Any]] = []
    free: list[list[Any]] = []
    for r in rows:
        label = _key_label(r, by)
        levels = r.get(col) or []
        for lv in levels:
            body.append([label, lv["eps"], lv["n"], lv["weight"], lv["eps_effective"]])
        t = r.get(f"{name}_tau")
        if isinstance(t, float | int) and math.isfinite(t):
            above = [lv for lv in levels if lv["eps"] > t]
            n_above = sum(int(lv["n"]) for lv in above)
            free.append([label, t, n_above, ", ".join(_num(lv["eps"]) for lv in above) or "–"])
        else:
            free.append([label, t, 0, "–"])
    lines = [f"#### Effective ε per level (`{name}`)", ""]
    lines += _table(["group", "ε level (after capping)", "rows", "weight per row",
                     "effective ε"], body)
    lines += [
        "",
        f"#### Privacy for free (`{name}`)",
        "",
        "τ is the clip level of the weight solver (seed 001): a row whose ε is above τ gets "
        "τ-DP with the same accuracy as if it had asked for τ, so it could be offered τ at "
        "no accuracy cost, and the ledger charges it τ only.",
        "",
    ]
    lines += _table(["group", "τ", "rows with ε > τ", "their ε levels"], free)
    lines.append("")
    return lines


def render_report(
    out: Path,
    job: JobSpec,
    runs: Sequence[ReleaseRun],
    distribution: BudgetDistribution,
    *,
    plots: bool = True,
) -> str:
    """The report's Markdown text (plots are written under ``out/plots``).

    Privacy:
        Shows released values with their accuracy metadata and functions of the public ε
        vectors and budgets only; never user ids, validation counts, the input fingerprint
        or the idempotency key (the commit id it shows is random).
    """
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    src = str(job.input.path) if job.input.path is not None else f"table `{job.input.table}`"
    budget = []
    if job.budget.default is not None:
        budget.append(f"default {_num(job.budget.default)} ε per user")
    if job.budget.column is not None:
        budget.append(f"column `{job.budget.column}`")
    lines = [
        f"# Release report: `{job.name}`",
        "",
        *([job.description, ""] if job.description else []),
        *_table(
            ["setting", "value"],
            [
                ["run at (UTC)", now],
                ["engine", job.engine],
                ["input", f"`{src}`"],
                ["ledger", f"{job.ledger_backend}: `{job.ledger.path}`"],
                ["budget", f"{'; '.join(budget)}; policy `{job.budget.policy}`"],
            ],
        ),
        "",
    ]
    if job.unsafe_seed is not None:
        lines += ["> **UNSAFE**: this job sets `unsafe_seed`; its noise is reproducible by "
                  "anyone who knows the seed and the values below are NOT private.", ""]
    lines += [
        "The ε values (and therefore the remaining budgets that cap them) are public in this "
        "model: they are visible in the per-level tables below.",
        "",
    ]
    for run in runs:
        lines += _release_section(out, run, plots)
    d = distribution
    lines += [
        "## Remaining budgets (after this run)",
        "",
        *_table(["users", "budget exhausted", "ε spent by all users"],
                [[d.users, d.exhausted, d.total_spent]]),
        "",
        *_table(
            ["quantile", "remaining ε", "spent ε"],
            [[f"{q:.0%}", d.remaining_quantiles.get(q), d.spent_quantiles.get(q)]
             for q in d.remaining_quantiles],
        ),
        "",
    ]
    if plots and d.hist_counts:
        png = plot_remaining(out / "plots" / "remaining_budget.png", d.hist_edges,
                             d.hist_counts)
        if png is not None:
            lines += [f"![remaining budgets]({png.relative_to(out).as_posix()})", ""]
    if plots and not _has_matplotlib():
        lines += ["_Plots skipped: install matplotlib to get them._", ""]
    return "\n".join(lines)


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
) -> Path:
    """Write ``out/report.md`` (atomically) and its plots; return the report's path.

    Privacy:
        See :func:`render_report`.
    """
    text = render_report(out, job, runs, distribution)
    path = out / "report.md"
    atomic_write(path, (text + "\n").encode())
    return path
