"""``hdp-release plan``: every release's predicted accuracy and every user's charge, before
anything is spent (issue 20).

The plan reads only the public columns of the job's input (user ids, ε columns, group
columns, the budget column) and the ledger's current spends (without locking or writing
it), builds the users' profile (:mod:`hdp_spark.jobs.allocation`) and replays the job
under each allocation method. Nothing is charged, no noise is drawn, nothing is written to
the ledger; the plan prints a table and writes a plot (and, on request, the per-user
table for the operator).

Like :func:`~hdp_spark.jobs.runner.check_job`, the plan assumes the ledger as it is now
and every release new: run it before the job (a re-run re-publishes committed releases
and charges nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.ledger import UNIT, BudgetPolicy, ChargeMode
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.errors import JobError
from hdp_spark.jobs.allocation import (
    Allocation,
    AllocationMethod,
    Profile,
    ReleaseModel,
    allocate,
)
from hdp_spark.jobs.engines import REMAINING
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.spec import EngineName, JobSpec, ReleaseSpec, load_job

__all__ = [
    "JobBudgetPlan",
    "job_profile",
    "plan_budget",
    "public_columns",
    "release_models",
    "render_plan",
    "write_plan_plot",
    "write_user_table",
]

_PLANNED_KINDS = ("mean", "histogram")


@dataclass(frozen=True, slots=True)
class JobBudgetPlan:
    """Result of :func:`plan_budget`.

    Attributes:
        job: the job.
        users: users in the input.
        releases: the releases as simulated.
        allocations: the result of every allocation method, by name.
        chosen: the job's ``[budget] allocation``.
        profile: the users' public profile.
        user_ids: the user ids (as strings), for :func:`write_user_table`.
        user_rows: each user's profile row.

    Privacy:
        Everything here is a function of public facts (ε values, group keys, budgets,
        spends, specs, weights). ``user_ids`` / ``user_rows`` tie users to their budgets:
        for the operator (like the ledger), not for publication.
    """

    job: JobSpec
    users: int
    releases: tuple[ReleaseModel, ...]
    allocations: Mapping[AllocationMethod, Allocation]
    chosen: AllocationMethod
    profile: Profile
    user_ids: np.ndarray[Any, Any]
    user_rows: np.ndarray[Any, Any]

    @property
    def selected(self) -> Allocation:
        """The allocation the job uses."""
        return self.allocations[self.chosen]


def release_models(job: JobSpec) -> tuple[ReleaseModel, ...]:
    """The simulation's view of the job's releases.

    Raises:
        JobError: a release has an aggregator kind the plan cannot predict yet, or uses
            partition selection (which groups it releases depends on the data).
    """
    models = []
    for rel in job.releases:
        if rel.selection is not None:
            sel = rel.selection
            msg = (
                f"[[releases]] id = {rel.id!r} uses `select_keys` (partition selection): "
                "which groups it releases depends on the data, so `hdp-release plan` and "
                "`[budget] allocation` cannot predict its accuracy and refuse it. Its "
                f"charges need no plan: every row is charged κ_i = min(ε_i, {sel.c:g}) "
                f"rounded down to steps of {float(sel.gamma):g} (capped to the user's "
                f"remaining budget), with δ = {sel.delta:g}, released group or not; "
                "`hdp-release check` shows the users over budget. Plan the job without "
                "this release (docs/jobs.md, \"Partition selection in jobs\")."
            )
            raise JobError(msg)
        aggs = []
        counts: dict[str, int] = {}
        for a in rel.aggregators:
            if a.kind not in _PLANNED_KINDS:
                msg = (
                    f"[[releases]] id = {rel.id!r}: kind {a.kind!r} cannot be planned or "
                    "allocated yet (`hdp-release plan` and `[budget] allocation` support "
                    f"{', '.join(_PLANNED_KINDS)}); got {a.kind!r}."
                )
                raise JobError(msg)
            spec = a.spec if a.kind == "mean" else a.spec.spec
            kind = get_kind(a.kind)
            aggs.append((kind.output_name(a.spec), spec))
            counts[spec.eps] = counts.get(spec.eps, 0) + 1
        keys = rel.keys if rel.keys is not None else ((),)
        models.append(ReleaseModel(rel.id, rel.weight, tuple(keys), tuple(aggs),
                                   tuple(counts.items())))
    return tuple(models)


def public_columns(job: JobSpec) -> list[str]:
    """The input columns a plan reads: user id, budget, group and ε columns (public)."""
    cols = [job.input.user_id]
    if job.budget.column:
        cols.append(job.budget.column)
    for rel in job.releases:
        cols.extend(rel.by)
        cols.extend(get_kind(a.kind).eps_column(a.spec) for a in rel.aggregators)
    return list(dict.fromkeys(cols))


def _key_index(df: pd.DataFrame, rel: ReleaseSpec) -> np.ndarray[Any, Any]:
    """Each row's index in the release's public key set (-1 outside it)."""
    if rel.keys is None:
        return np.zeros(len(df), dtype=np.int64)
    for c in rel.by:
        if c not in df.columns:
            msg = f"[[releases]] id = {rel.id!r}: group column `{c}` is not in the table."
            raise JobError(msg)
    codes = df.groupby(list(rel.by), dropna=False, sort=False).ngroup().to_numpy()
    uniques = df[list(rel.by)].drop_duplicates()
    lookup = {tuple(k): i for i, k in enumerate(rel.keys)}
    per_unique = np.array(
        [lookup.get(tuple(row), -1) for row in uniques.itertuples(index=False, name=None)],
        dtype=np.int64,
    )
    return per_unique[codes] if len(per_unique) else np.zeros(0, dtype=np.int64)


def job_profile(
    job: JobSpec, prepared: pd.DataFrame
) -> tuple[Profile, np.ndarray[Any, Any]]:
    """The users' profile from a prepared public frame (``__remaining`` added), and each
    row's profile row.

    Privacy:
        Reads the ε, group and budget columns only (public in this model).
    """
    eps_cols = list(dict.fromkeys(
        get_kind(a.kind).eps_column(a.spec) for rel in job.releases for a in rel.aggregators
    ))
    frame = pd.DataFrame({f"__e{i}": pd.to_numeric(prepared[c], errors="coerce")
                          .to_numpy(np.float64) for i, c in enumerate(eps_cols)})
    for r, rel in enumerate(job.releases):
        frame[f"__g{r}"] = _key_index(prepared, rel)
    frame["__rem"] = prepared[REMAINING].to_numpy(np.int64)
    cols = list(frame.columns)
    grouped = frame.groupby(cols, dropna=False, sort=True)
    rows = grouped.ngroup().to_numpy(np.int64)
    sizes = grouped.size().reset_index(name="__n")
    profile = Profile(
        counts=sizes["__n"].to_numpy(np.int64),
        remaining=sizes["__rem"].to_numpy(np.int64),
        eps={c: sizes[f"__e{i}"].to_numpy(np.float64) for i, c in enumerate(eps_cols)},
        groups=tuple(sizes[f"__g{r}"].to_numpy(np.int64) for r in range(len(job.releases))),
    )
    return profile, rows


def _spent(job: JobSpec) -> pd.DataFrame:
    """The ledger's current spends, read without locking or writing it (empty for a
    ledger that does not exist yet)."""
    from hdp_spark.ledger import open_ledger
    from hdp_spark.ledger.base import UNITS_COLUMN, USER_COLUMN
    from hdp_spark.ledger.io import PandasIO

    path = job.ledger.path
    if not path.exists():
        return pd.DataFrame({USER_COLUMN: pd.Series([], dtype=object),
                             UNITS_COLUMN: pd.Series([], dtype=np.int64)})
    job.check_ledger_path()
    ledger = open_ledger(job.ledger_backend, path, lock_timeout=job.ledger.lock_timeout,
                         compact_every=job.ledger.compact_every, create=False)
    spent: pd.DataFrame = ledger.spent(PandasIO())
    return spent


def _load_public(job: JobSpec, spark: Any) -> pd.DataFrame:
    from hdp_spark.jobs.engines import check_engine, make_adapter

    check_engine(job.engine, spark, job.spark_conf)
    adapter = make_adapter(job.engine, spark, job.spark_conf)
    cols = public_columns(job)
    df = adapter.load(job.input)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        msg = f"`[input]`: the table lacks the column(s) the job reads: {missing!r}."
        raise JobError(msg)
    out: pd.DataFrame = df[cols].copy() if job.engine == "pandas" else \
        df.select(*cols).toPandas()
    return out


def _check_public(job: JobSpec, df: pd.DataFrame) -> None:
    from hdp_spark.jobs._pandas import PandasAdapter

    check = PandasAdapter().check_input(df, job.input.user_id, job.budget)
    col = job.input.user_id
    if check.null_users:
        msg = (f"`[input] user_id` column `{col}` must not be null; {check.null_users} "
               "row(s) break this rule.")
        raise JobError(msg)
    if check.duplicate_users:
        msg = (f"`[input] user_id` column `{col}` must be unique (one row per user) for the "
               f"job's row-level aggregators; {check.duplicate_users} row(s) repeat an id.")
        raise JobError(msg)
    if check.invalid_budgets:
        msg = (f"budget must be a finite number in [0, 2**20] (or null with `[budget] "
               f"default`); {check.invalid_budgets} row(s) break this rule.")
        raise JobError(msg)


def plan_budget(
    job: JobSpec | str | Path, *, engine: EngineName | None = None, spark: Any = None
) -> JobBudgetPlan:
    """Predict every release's accuracy and every user's charge under each allocation.

    Args:
        job: a :class:`~hdp_spark.jobs.spec.JobSpec` or a TOML job file.
        engine: read the input with this engine instead of the job's.
        spark: the SparkSession (Spark engine).

    Raises:
        JobError: the job, its public columns or a kind the plan cannot predict yet.
        EpsilonColumnError: an ε column holds an invalid ε (as a run would raise).

    Privacy:
        Reads only the public columns (user ids, ε, group keys, budgets) and the ledger's
        spends; charges nothing, draws no noise and writes nothing to the ledger. The
        output is a function of those public facts: two tables that differ only in their
        value columns give the same plan.
    """
    spec = job if isinstance(job, JobSpec) else load_job(job, engine=engine)
    if engine is not None and isinstance(job, JobSpec):
        spec = spec.with_engine(engine)
    models = release_models(spec)
    df = _load_public(spec, spark)
    _check_public(spec, df)
    from hdp_spark.jobs._pandas import PandasAdapter

    prepared = PandasAdapter().prepare(df, spec.input.user_id, spec.budget, _spent(spec))
    profile, rows = job_profile(spec, prepared)
    policy: BudgetPolicy = spec.budget.policy
    mode: ChargeMode = spec.budget.charge
    methods: tuple[AllocationMethod, ...] = ("sequential", "equal", "optimal")
    allocations = {m: allocate(profile, models, m, policy, mode) for m in methods}
    return JobBudgetPlan(spec, len(df), models, allocations, spec.budget.allocation,
                         profile, df[spec.input.user_id].astype(str).to_numpy(), rows)


# -- rendering ---------------------------------------------------------------------------


def _num(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if math.isinf(x):
        return "inf"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                     for i, (h, w) in enumerate(zip(header, widths, strict=True)))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return out


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
        label = _num(lo) if lo == hi else f"{_num(lo)}-{_num(hi)}"
        charge = _num(float(c.min())) if c.min() == c.max() else \
            f"{_num(float(c.min()))}-{_num(float(c.max()))}"
        out.append([label, f"{n:,}", charge, _num(float((c * counts[sel]).sum()))])
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
        f"  remaining budget before: min {_num(q0[0])}, median {_num(q0[1])}, "
        f"max {_num(q0[2])}",
        f"  remaining budget after:  min {_num(q[0])}, median {_num(q[1])}, max {_num(q[2])}",
        f"  users untouched {untouched:,}, partly spent {partly:,}, exhausted {exhausted:,}",
    ]


def render_plan(plan: JobBudgetPlan) -> str:
    """The plan as a readable text table (its size does not grow with the users)."""
    job = plan.job
    lines = [
        f"plan of job {job.name}: {plan.users:,} user(s), {len(plan.releases)} release(s); "
        f"budget policy {job.budget.policy}, charge {job.budget.charge}, allocation "
        f"{plan.chosen}",
        "nothing is charged; the ledger is read, never written",
        "",
        "allocation methods side by side (share = part of each user's budget left at the "
        "start a release may use; error = weight x predicted variance / range^2):",
    ]
    methods: list[AllocationMethod] = ["sequential", "equal", "optimal"]
    header = ["release", "weight", *(f"{m} share" for m in methods),
              *(f"{m} error" for m in methods)]
    rows = []
    for r, rel in enumerate(plan.releases):
        outs = [plan.allocations[m].simulation.releases[r] for m in methods]
        rows.append([rel.id, _num(rel.weight), *(_num(o.share) for o in outs),
                     *("refused" if o.refused else "not run" if not o.ran
                       else _num(rel.weight * o.error) for o in outs)])
    rows.append(["total", "", *("" for _ in methods),
                 *(_num(plan.allocations[m].error) for m in methods)])
    lines += ["  " + x for x in _table(header, rows)]
    alloc = plan.selected
    lines += ["", f"predicted accuracy and charges with the job's allocation ({plan.chosen}):"]
    for r, rel in enumerate(plan.releases):
        o = alloc.simulation.releases[r]
        lines.append("")
        lines.append(f"release {rel.id} (share {_num(o.share)}, weight {_num(rel.weight)})")
        if o.refused:
            lines.append(f"  refused: {o.users_over:,} user(s) lack budget "
                         "(`[budget] policy` = 'fail'); later releases do not run")
            continue
        if not o.ran:
            lines.append("  not run (an earlier release is refused)")
            continue
        acc = []
        for key, name, e in o.explained:
            acc.append([_key_text(key), name, f"{e.n:,}", _num(e.half_width),
                        _num(e.baseline_half_width if e.baseline_half_width is not None
                             else math.nan),
                        _num(e.noise_scale), "yes" if e.fallback else "no",
                        f"{e.free_rows:,}"])
        lines += ["  " + x for x in _table(
            ["group", "aggregator", "n", "half_width", "baseline", "noise_scale",
             "fallback", "free_rows"], acc)]
        classes = _charge_classes(plan, r, alloc)
        lines.append(f"  users capped or excluded by the budget: {o.users_over:,}")
        lines += ["  " + x for x in _table(
            ["ε allowed", "users", "charge each", "ε total"], classes)]
    lines += ["", "budgets after the job:", *_budget_state(plan, alloc)]
    return "\n".join(lines) + "\n"


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
    for rel, o in zip(plan.releases, alloc.simulation.releases, strict=True):
        specs = dict(rel.aggregators)
        for key, name, e in o.explained:
            spec = specs[name]
            span = float(spec.upper) - float(spec.lower) if isinstance(spec, MeanSpec) else 1.0
            labels.append(f"{rel.id}: {_key_text(key)}" if len(rel.aggregators) == 1
                          else f"{rel.id}: {_key_text(key)} {name}")
            ours.append(e.half_width / span)
            base.append(math.nan if e.baseline_half_width is None
                        else e.baseline_half_width / span)
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
