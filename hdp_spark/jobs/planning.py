"""``hdp-release plan``: every release's predicted accuracy and every user's charge, before
anything is spent (issue 20).

The plan reads only the public columns of the job's input (user ids, ε columns, group
columns, the budget column) and the ledger's current spends (without locking or writing
it), builds the users' profile (:mod:`hdp_spark.jobs.allocation`) and replays the job
under each allocation method. Nothing is charged, no noise is drawn, nothing is written to
the ledger; the plan prints a table and writes a plot (and, on request, the per-user
table for the operator).

Like :func:`~hdp_spark.jobs.dry_run.check_job`, the plan assumes the ledger as it is now.
Releases committed already for the current input (a run re-publishes them and charges
nothing: :func:`~hdp_spark.jobs.dry_run.committed_releases`) are listed as such and left
out of the prediction, which covers only what ``run`` would compute and charge.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.ledger import BudgetPolicy, ChargeMode
from hdp_spark.errors import JobError
from hdp_spark.jobs.allocation import (
    AllocationMethod,
    Profile,
    ReleaseModel,
    allocate,
)
from hdp_spark.jobs.budget_plan import JobBudgetPlan, Prediction
from hdp_spark.jobs.engines import check_engine, make_adapter
from hdp_spark.jobs.job_model import ALLOCATED_KINDS, job_profile, public_columns, release_models
from hdp_spark.jobs.plan_render import render_plan, write_plan_plot, write_user_table
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.selection import selection_eps
from hdp_spark.jobs.spec import EngineName, JobSpec, ReleaseSpec, load_job

Key = tuple[object, ...]

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
    check_engine(job.engine, spark, job.spark_conf)
    adapter = make_adapter(job.engine, spark, job.spark_conf)
    cols = public_columns(job)
    df = adapter.load(job.input)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        msg = f"`[input]`: the table lacks the column(s) the job reads: {missing!r}."
        raise JobError(msg)
    return adapter.columns_frame(df, cols)


def _row_level(job: JobSpec) -> bool:
    """Whether some kind of the job needs one row per user (as the runner)."""
    return any(get_kind(a.kind).unit not in ("user", "none") and rel.unit is None
               and not a.bounds_users(job.input.user_id)
               for rel in job.releases for a in rel.aggregators)


def _check_public(job: JobSpec, df: pd.DataFrame) -> None:
    from hdp_spark.jobs._pandas import PandasAdapter

    check = PandasAdapter().check_input(df, job.input.user_id, job.budget)
    col = job.input.user_id
    if check.null_users:
        msg = (f"`[input] user_id` column `{col}` must not be null; {check.null_users} "
               "row(s) break this rule.")
        raise JobError(msg)
    if check.duplicate_users:
        if _row_level(job):
            msg = (f"`[input] user_id` column `{col}` must be unique (one row per user) for "
                   f"the job's row-level aggregators; {check.duplicate_users} row(s) repeat "
                   "an id.")
            raise JobError(msg)
        if check.inconsistent_budgets:
            msg = (f"`[budget] column` `{job.budget.column}` must be the same on every row of "
                   f"a user; {check.inconsistent_budgets} user(s) break this rule.")
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
        Reads only the public columns (user ids, ε, group keys, budgets), the ledger's
        spends and which releases it holds for this input (keyed fingerprint of the input
        files, as ``check``); charges nothing, draws no noise and writes nothing to the ledger. The
        output is a function of those public facts: two tables that differ only in their
        value columns give the same plan.
    """
    from hdp_spark.jobs.dry_run import committed_releases

    spec = job if isinstance(job, JobSpec) else load_job(job, engine=engine)
    if engine is not None and isinstance(job, JobSpec):
        spec = spec.with_engine(engine)
    done = committed_releases(spec, spark=spark)
    committed = tuple(rel.id for rel in spec.releases if rel.id in done)
    spec = _to_compute(spec, done)
    allocatable = all(a.kind in ALLOCATED_KINDS and rel.selection is None
                      for rel in spec.releases for a in rel.aggregators)
    models = release_models(spec, plan_only=spec.budget.allocation == "sequential")
    df = _load_public(spec, spark)
    _check_public(spec, df)
    from hdp_spark.jobs._pandas import PandasAdapter

    adapter = PandasAdapter()
    prepared = adapter.prepare(df, spec.input.user_id, spec.budget, _spent(spec))
    for rel in spec.releases:  # as the run: a person's ε is the smallest of their rows
        if rel.unit is not None:
            prepared = adapter.person_eps(prepared, selection_eps(rel)[0])
    uid = prepared[spec.input.user_id].astype(str)
    once = ~uid.duplicated().to_numpy()  # user-level jobs: one profile row per user
    profile, rows = job_profile(spec, prepared)
    user_rows = rows[once]
    policy: BudgetPolicy = spec.budget.policy
    mode: ChargeMode = spec.budget.charge
    methods: tuple[AllocationMethod, ...] = (
        ("sequential", "equal", "optimal") if allocatable else ("sequential",))
    allocations = {m: allocate(profile, models, m, policy, mode) for m in methods}
    chosen = allocations[spec.budget.allocation]
    predictions = tuple(
        _predict(profile, r, rel, model, out, df)
        for r, (rel, model, out) in enumerate(zip(spec.releases, models,
                                                  chosen.simulation.releases, strict=True))
    )
    return JobBudgetPlan(spec, int(once.sum()), models, allocations, spec.budget.allocation,
                         profile, uid[once].to_numpy(), user_rows, predictions, committed)


def _to_compute(spec: JobSpec, committed: frozenset[str]) -> JobSpec:
    """The plan's view of the job: only the releases a run would compute (possibly none,
    which a job file may not declare, hence no ``replace``: that would re-validate)."""
    if not committed:
        return spec
    view = copy.copy(spec)
    object.__setattr__(view, "releases",
                       tuple(r for r in spec.releases if r.id not in committed))
    return view


def _explain_keys(rel: ReleaseSpec) -> dict[str, Any]:
    if rel.keys is None:
        return {}
    keys = [k[0] for k in rel.keys] if len(rel.by) == 1 else [tuple(k) for k in rel.keys]
    return {"by": list(rel.by), "keys": keys}


def _predict(
    profile: Profile, r: int, rel: ReleaseSpec, model: ReleaseModel, outcome: Any,
    df: pd.DataFrame,
) -> tuple[Prediction, ...]:
    """Predicted accuracy of the release's kinds other than mean/histogram, with the
    simulated budget rule (``outcome``): the simulation's ``explain`` of a user-level mean
    (its capped ε), ``explain`` of an LDP aggregation on the public columns, or the
    partial-DP kinds' noise, a function of their parameters.

    Privacy:
        Reads the public columns only (user ids, ε, group keys); never a value column.
    """
    import hdp_spark.pandas as hpd

    if not outcome.ran or outcome.refused:
        return ()
    out: list[Prediction] = []
    kw = _explain_keys(rel)
    key_cols = list(rel.by)
    entries = {get_kind(a.kind).output_name(a.spec): a for a in rel.aggregators}
    spans = {name: float(um.span) for name, um in model.users}
    for key, name, p in outcome.users_explained:
        out.append(Prediction(key, name, "user_mean", p.users, p.half_width, p.noise_scale,
                              p.fallback, "bound" if p.bound else "exact", spans[name]))
    for name in model.free:
        entry = entries[name].spec
        ldp = entry.spec
        unit = {"privacy_unit": entry.privacy_unit} if entry.privacy_unit else {}
        plan = hpd.explain(df, ldp, **kw, **unit)
        for _, row in plan.iterrows():
            out.append(Prediction(tuple(row[c] for c in key_cols), name, "ldp_mean", int(row["n"]),
                                  float(row["half_width"]), 0.0, bool(row["fallback"]), "bound",
                                  float(ldp.upper) - float(ldp.lower)))
    inside = profile.groups[r] >= 0
    read = int(profile.counts[inside].sum()) - outcome.users_over
    if model.selection is not None:
        sel = model.selection.selection
        note = (f"partition selection: which groups are released is data-dependent (no "
                f"prediction); every row is charged min(ε_i, {sel.c:g}) rounded down to "
                f"steps of {float(sel.gamma):g}, with δ = {sel.delta:g}")
        for a in rel.aggregators:
            name = get_kind(a.kind).output_name(a.spec)
            out.append(Prediction((), name, a.kind, int(profile.counts[inside].sum()),
                                  math.nan, math.nan, False, "none", math.nan, note))
    for p in model.persons:
        a = entries[p.name]
        out.append(_person_prediction(a.kind, a.spec, p.name, read))
    return tuple(out)


def _person_prediction(kind: str, entry: Any, name: str, read: int) -> Prediction:
    """Noise of the released counts (exact: a function of the parameters); heavy hitters'
    detection guarantee is a bound (docs/partial_dp.md, "Detection")."""
    from hdp_spark.core.partial.budget import count_scale_for
    from hdp_spark.core.partial.heavy_hitters import count_half_width

    if kind == "marginals":
        # the job's interval of each noisy count (kinds_partial._release_zcdp): the
        # discrete Gaussian of variance σ² is σ-subgaussian (exact, parameters only)
        sigma2 = float(entry.spec.budget.sigma2)
        half = math.floor(math.sqrt(2 * sigma2 * math.log(2 / entry.params["beta"])))
        return Prediction((), name, kind, read, float(half), math.sqrt(sigma2), False,
                          "exact", math.nan, "noisy count of each marginal cell, before "
                          "the projection")
    if kind == "mwem":
        return Prediction((), name, kind, read, math.nan, math.nan, False, "none", math.nan,
                          "MWEM's error is data-dependent: no prediction")
    if kind == "heavy_hitters":
        b = entry.spec.budget
        note = (f"a record with count >= {b.detection_count} is released with probability "
                f">= {1 - b.failure_prob:.4g} (bound); which records are released is "
                "data-dependent")
        if b.count_scale is None:
            return Prediction((), name, kind, read, math.nan, math.nan, False, "none",
                              math.nan, note)
        scale = b.count_scale
        beta = float(entry.spec.beta)
    else:
        scale = count_scale_for(float(entry.params["eps0"]))
        beta = float(entry.params.get("beta", 0.05))
        note = "per attribute value"
    return Prediction((), name, kind, read, float(count_half_width(scale, beta)),
                      float(scale), False, "exact", math.nan, note)


# -- rendering ---------------------------------------------------------------------------


