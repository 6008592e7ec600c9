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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.ledger import UNIT, BudgetPolicy, ChargeMode
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.errors import JobError
from hdp_spark.jobs.adapter import REMAINING
from hdp_spark.jobs.allocation import (
    Allocation,
    AllocationMethod,
    PersonCharge,
    Profile,
    ReleaseModel,
    SelectionCharge,
    allocate,
)
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.selection import clip_point, selection_eps
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

_ALLOCATED_KINDS = ("mean", "histogram", "user_mean", "ldp_mean")
"""Kinds whose predicted variance the "equal"/"optimal" allocation can weigh: the noise
variance ``explain`` predicts (for the user-level mean, its bound of the final noise); the
LDP aggregation charges nothing and its accuracy does not depend on the budget. Heavy
hitters and attribute histograms are planned, but only with the sequential allocation: a
share below their per-person demand leaves persons out, which no variance captures."""


@dataclass(frozen=True, slots=True)
class Prediction:
    """The predicted accuracy of one (group, aggregator) of a kind other than
    ``mean``/``histogram``.

    Attributes:
        key: the group key (``()`` for a global release).
        name: the aggregator's output name.
        kind: its kind.
        n: users (user-level mean), reports (LDP) or persons read (partial DP).
        half_width: the (1 - β) interval half-width (value units; counts for partial DP);
            NaN without a prediction.
        noise_scale: the noise scale (0 for the LDP aggregation, whose reports carry it).
        fallback: the release will be the data-independent fallback.
        basis: ``"exact"`` (what the release reports), ``"bound"`` (an upper bound: the
            user-level mean's final step, the LDP radius) or ``"none"``.
        span: the output range (for the plot), NaN for counts.
        note: a short public remark (heavy hitters' detection guarantee).
    """

    key: Key
    name: str
    kind: str
    n: int
    half_width: float
    noise_scale: float
    fallback: bool
    basis: str
    span: float
    note: str = ""


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
        predictions: per release, the predicted accuracy of its kinds other than
            ``mean``/``histogram`` with the job's allocation (:class:`Prediction`).
        committed: the job's releases committed already (in job order): a run re-publishes
            them and charges nothing; ``job`` and ``releases`` hold only the others.

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
    predictions: tuple[tuple[Prediction, ...], ...] = ()
    committed: tuple[str, ...] = ()

    @property
    def selected(self) -> Allocation:
        """The allocation the job uses."""
        return self.allocations[self.chosen]


def release_models(job: JobSpec, *, plan_only: bool = False) -> tuple[ReleaseModel, ...]:
    """The simulation's view of the job's releases.

    Args:
        job: the job.
        plan_only: model every kind (``hdp-release plan`` with the sequential
            allocation); without it, refuse kinds the "equal"/"optimal" allocation cannot
            weigh (the runner's check before an allocated run).

    Raises:
        JobError: without ``plan_only``, a release has a kind the allocation cannot weigh;
            a release uses partition selection (which groups it releases depends on the
            data).
    """
    models = []
    for rel in job.releases:
        if rel.selection is not None:
            sel = rel.selection
            if not plan_only:
                msg = (
                    f"[[releases]] id = {rel.id!r} uses `select_keys` (partition selection): "
                    "which groups it releases depends on the data, so `[budget] allocation` "
                    "= 'equal' or 'optimal' cannot weigh its accuracy and refuses it. Its "
                    f"charges need no weighing: every row is charged κ_i = min(ε_i, {sel.c:g}) "
                    f"rounded down to steps of {float(sel.gamma):g} (capped to the user's "
                    f"remaining budget), with δ = {sel.delta:g}, released group or not; "
                    "`hdp-release plan` shows them (docs/jobs.md, \"Partition selection in "
                    "jobs\")."
                )
                raise JobError(msg)
            col, grid = selection_eps(rel)
            models.append(ReleaseModel(
                rel.id, rel.weight, ((),), (), ((col, 1),),
                selection=SelectionCharge(col, grid, clip_point(sel, grid), sel)))
            continue
        aggs = []
        users: list[tuple[str, Any]] = []
        persons: list[PersonCharge] = []
        free: list[str] = []
        counts: dict[str, int] = {}
        for a in rel.aggregators:
            if not plan_only and a.kind not in _ALLOCATED_KINDS:
                msg = (
                    f"[[releases]] id = {rel.id!r}: kind {a.kind!r} cannot be allocated yet "
                    "(`[budget] allocation` = 'equal' or 'optimal' supports "
                    f"{', '.join(_ALLOCATED_KINDS)}; `hdp-release plan` plans every kind "
                    f"with the sequential allocation); got {a.kind!r}."
                )
                raise JobError(msg)
            kind = get_kind(a.kind)
            name = kind.output_name(a.spec)
            if kind.unit != "none":
                col = kind.eps_column(a.spec)
                counts[col] = counts.get(col, 0) + 1
            if a.kind in ("mean", "histogram"):
                aggs.append((name, a.spec if a.kind == "mean" else a.spec.spec))
            elif kind.unit == "user":
                users.append((name, a.spec))
            elif kind.unit == "person":
                persons.append(PersonCharge(name, kind.eps_column(a.spec),
                                            float(kind.uniform_eps(a.spec)),
                                            _person_charge(a.kind, a.spec),
                                            _person_charge_at(a.kind, a.spec)))
            else:
                free.append(name)
        keys = rel.keys if rel.keys is not None else ((),)
        models.append(ReleaseModel(rel.id, rel.weight, tuple(keys), tuple(aggs),
                                   tuple(counts.items()), tuple(users), tuple(persons),
                                   tuple(free)))
    return tuple(models)


def _person_charge(kind: str, entry: Any) -> float:
    """The per-person ε the release of a one-global-ε kind reports (and the run charges):
    heavy hitters' budget's ``eps_person``; attribute histograms' d · 2/b with b the
    count scale of ε₀; the marginals' (ε, δ) conversion of their ρ (all functions of the
    parameters only). MWEM's depends on the rows read as well (:func:`_person_charge_at`);
    its demand bound stands in here."""
    if kind == "heavy_hitters":
        return float(entry.spec.budget.eps_person)
    if kind in ("marginals", "mwem"):
        return float(entry.eps_person)
    from hdp_spark.core.partial.budget import count_scale_for

    return len(entry.params["cols"]) * (2.0 / float(count_scale_for(float(entry.params["eps0"]))))


def _person_charge_at(kind: str, entry: Any) -> Callable[[int], float] | None:
    """MWEM's charge as a function of the public number of rows it reads (its rounds T
    depend on n): the (ε, δ) conversion of the ρ the release reports."""
    if kind != "mwem":
        return None
    from hdp_spark.core.partial import accounting

    spec = entry.spec

    def charged(rows: int) -> float:
        return float(accounting.eps_cks20(spec.rho_for(max(rows, 1))[1], spec.delta))

    return charged


def public_columns(job: JobSpec) -> list[str]:
    """The input columns a plan reads: user id, budget, group and ε columns (public)."""
    cols = [job.input.user_id]
    if job.budget.column:
        cols.append(job.budget.column)
    for rel in job.releases:
        if rel.selection is None:  # a selection release's groups are private: not read
            cols.extend(rel.by)
        cols.extend(get_kind(a.kind).eps_column(a.spec) for a in rel.aggregators
                    if get_kind(a.kind).unit != "person")  # their ε is a constant
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
        if get_kind(a.kind).unit != "person"
    ))
    frame = pd.DataFrame({f"__e{i}": pd.to_numeric(prepared[c], errors="coerce")
                          .to_numpy(np.float64) for i, c in enumerate(eps_cols)})
    for r, rel in enumerate(job.releases):
        frame[f"__g{r}"] = _key_index(prepared, rel)
    frame["__rem"] = prepared[REMAINING].to_numpy(np.int64)
    user_level = any(get_kind(a.kind).unit == "user"
                     for rel in job.releases for a in rel.aggregators)
    if not user_level:
        cols = list(frame.columns)
        grouped = frame.groupby(cols, dropna=False, sort=True)
        rows = grouped.ngroup().to_numpy(np.int64)
        sizes = grouped.size().reset_index(name="__n")
        profile = Profile(
            counts=sizes["__n"].to_numpy(np.int64),
            remaining=sizes["__rem"].to_numpy(np.int64),
            eps={c: sizes[f"__e{i}"].to_numpy(np.float64) for i, c in enumerate(eps_cols)},
            groups=tuple(sizes[f"__g{r}"].to_numpy(np.int64)
                         for r in range(len(job.releases))),
        )
        return profile, rows
    # user-level means: one profile row per user, with its row count k and its id (the
    # order key's input); a user's ε, groups and budget are the same on all of its rows
    ids = prepared[job.input.user_id]
    text = ids.astype(str) if not pd.api.types.is_integer_dtype(ids) else \
        ids.map(lambda u: str(int(u)))
    codes, uniques = pd.factorize(text, sort=False)
    once = np.unique(codes, return_index=True)[1]
    k = np.bincount(codes, minlength=len(uniques)).astype(np.int64)
    first = frame.iloc[once]
    profile = Profile(
        counts=np.ones(len(once), dtype=np.int64),
        remaining=first["__rem"].to_numpy(np.int64),
        eps={c: first[f"__e{i}"].to_numpy(np.float64) for i, c in enumerate(eps_cols)},
        groups=tuple(first[f"__g{r}"].to_numpy(np.int64) for r in range(len(job.releases))),
        k=k[codes[once]],
        ids=tuple(str(t) for t in np.asarray(uniques)[codes[once]]),
    )
    position = np.empty(len(uniques), dtype=np.int64)
    position[codes[once]] = np.arange(len(once))
    return profile, position[codes]


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


def _row_level(job: JobSpec) -> bool:
    """Whether some kind of the job needs one row per user (as the runner)."""
    return any(get_kind(a.kind).unit not in ("user", "none")
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
    allocatable = all(a.kind in _ALLOCATED_KINDS and rel.selection is None
                      for rel in spec.releases for a in rel.aggregators)
    models = release_models(spec, plan_only=spec.budget.allocation == "sequential")
    df = _load_public(spec, spark)
    _check_public(spec, df)
    from hdp_spark.jobs._pandas import PandasAdapter

    prepared = PandasAdapter().prepare(df, spec.input.user_id, spec.budget, _spent(spec))
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
        ldp = entries[name].spec.spec
        plan = hpd.explain(df, ldp, **kw)
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
        rows.append([rel.id, _num(rel.weight),
                     *("n/a" if o is None else _num(o.share) for o in outs),
                     *("n/a" if o is None else "refused" if o.refused
                       else "not run" if not o.ran
                       else "-" if rel.persons
                       else _num(rel.weight * o.error) for o in outs)])
    rows.append(["total", "", *("" for _ in methods),
                 *(_num(plan.allocations[m].error) if m in plan.allocations else "n/a"
                   for m in methods)])
    lines += ["  " + x for x in _table(header, rows)]
    if len(plan.allocations) < len(methods):
        kinds = sorted({a.kind for rel in job.releases for a in rel.aggregators
                        if a.kind not in _ALLOCATED_KINDS})
        kinds += ["a release under select_keys"] if any(
            rel.selection is not None for rel in job.releases) else []
        lines.append(f"  n/a: 'equal' and 'optimal' allocate only {', '.join(_ALLOCATED_KINDS)}"
                     f" releases with public keys (this job has {', '.join(kinds)}); "
                     "sequential shown")
    if any(rel.persons for rel in plan.releases):
        lines.append("  -: no predicted variance enters the error of the partial-DP "
                     "releases (see their accuracy below)")
    if any(rel.users for rel in plan.releases):
        lines.append("  user_mean error: the bound of its final noise (explain)")
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
                        f"{e.free_rows:,}", "exact"])
        preds = plan.predictions[r] if plan.predictions else ()
        for p in preds:
            acc.append([_key_text(p.key), p.name, f"{p.n:,}", _num(p.half_width), "-",
                        _num(p.noise_scale), "yes" if p.fallback else "no", "-",
                        p.basis if p.basis != "none" else "no prediction"])
        lines += ["  " + x for x in _table(
            ["group", "aggregator", "n", "half_width", "baseline", "noise_scale",
             "fallback", "free_rows", "prediction"], acc)]
        for p in preds:
            if p.note:
                lines.append(f"  {p.name}: {p.note}")
        if rel.free:
            lines.append(f"  {', '.join(rel.free)}: LDP aggregation, charges nothing (the "
                         "reports were paid for on the devices)")
        classes = _charge_classes(plan, r, alloc)
        lines.append(f"  users capped or excluded by the budget: {o.users_over:,}")
        if not o.charges_exact:
            lines.append("  charges are upper bounds: a user-level mean's final step charges "
                         "eps_effective <= ε, data-dependent (exact with charge mode "
                         "'demand' or one ε level per group)")
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
    preds = plan.predictions or tuple(() for _ in plan.releases)
    for rel, o, pr in zip(plan.releases, alloc.simulation.releases, preds, strict=True):
        specs = dict(rel.aggregators)
        single = len(rel.aggregators) + len(rel.users) + len(rel.free) == 1
        for key, name, e in o.explained:
            spec = specs[name]
            span = float(spec.upper) - float(spec.lower) if isinstance(spec, MeanSpec) else 1.0
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
