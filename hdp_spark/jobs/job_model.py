"""A job as the budget allocation sees it: one model per release and the users' profile.

:func:`release_models` turns each release into a
:class:`~hdp_spark.jobs.allocation.ReleaseModel` (its ε columns, charges and specs) and
:func:`job_profile` turns the public columns of the input into a
:class:`~hdp_spark.jobs.allocation.Profile`. Both the runner (``[budget] allocation``) and
the plan (``hdp-release plan``) use them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.errors import JobError
from hdp_spark.jobs.adapter import REMAINING
from hdp_spark.jobs.allocation import PersonCharge, Profile, ReleaseModel, SelectionCharge
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.selection import clip_point, selection_eps
from hdp_spark.jobs.simulation import UnitCharge
from hdp_spark.jobs.spec import JobSpec, ReleaseSpec
from hdp_spark.jobs.unit import unit_parameters

__all__ = ["ALLOCATED_KINDS", "job_profile", "public_columns", "release_models"]

Key = tuple[object, ...]


ALLOCATED_KINDS = ("mean", "histogram", "user_mean", "ldp_mean")
"""Kinds whose predicted variance the "equal"/"optimal" allocation can weigh: the noise
variance ``explain`` predicts (for the user-level mean, its bound of the final noise); the
LDP aggregation charges nothing and its accuracy does not depend on the budget. Heavy
hitters and attribute histograms are planned, but only with the sequential allocation: a
share below their per-person demand leaves persons out, which no variance captures."""


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
        if rel.selection is not None and rel.unit is None:
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
        if rel.unit is not None:
            if not plan_only:
                msg = (
                    f"[[releases]] id = {rel.id!r} uses `privacy_unit`: its weights are "
                    "private, so `[budget] allocation` = 'equal' or 'optimal' cannot weigh "
                    "its accuracy and refuses it. Its charges need no weighing: every user "
                    "is charged once, at most their ε (docs/jobs.md, \"Privacy unit in "
                    "jobs\"); `hdp-release plan` shows them."
                )
                raise JobError(msg)
            col, grid = selection_eps(rel)
            models.append(ReleaseModel(
                rel.id, rel.weight, ((),), (), ((col, 1),),
                unit=UnitCharge(col, grid, unit_parameters(rel), tuple(
                    (get_kind(a.kind).output_name(a.spec),
                     a.spec if a.kind == "mean" else a.spec.spec)
                    for a in rel.aggregators))))
            continue
        aggs = []
        users: list[tuple[str, Any]] = []
        persons: list[PersonCharge] = []
        free: list[str] = []
        counts: dict[str, int] = {}
        for a in rel.aggregators:
            if not plan_only and a.kind not in ALLOCATED_KINDS:
                msg = (
                    f"[[releases]] id = {rel.id!r}: kind {a.kind!r} cannot be allocated yet "
                    "(`[budget] allocation` = 'equal' or 'optimal' supports "
                    f"{', '.join(ALLOCATED_KINDS)}; `hdp-release plan` plans every kind "
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
    heavy hitters' budget's ``eps_person``; attribute histograms' d · 2R/b with b the
    count scale of ε₀ and R = ``max_rows``; the marginals' (ε, δ) conversion of their ρ
    (all functions of the parameters only). MWEM's depends on the rows read as well
    (:func:`_person_charge_at`); its demand bound stands in here."""
    if kind == "heavy_hitters":
        return float(entry.spec.budget.eps_person)
    if kind in ("marginals", "mwem"):
        return float(entry.eps_person)
    from hdp_spark.core.partial.histograms import histogram_scale

    rows = int(entry.params.get("max_rows", 1))
    scale = histogram_scale(float(entry.params["eps0"]), rows)
    return len(entry.params["cols"]) * (2.0 * rows / float(scale))


def _person_charge_at(kind: str, entry: Any) -> Callable[[int], float] | None:
    """MWEM's charge as a function of the public number of rows it reads (its rounds T
    depend on n): the (ε, δ) conversion of the ρ the release reports. None for the other
    kinds and for MWEM under a privacy unit (n private: the bound over every T)."""
    if kind != "mwem" or entry.spec.privacy_unit is not None:
        return None  # under a unit the run charges the bound (kinds_partial._release_zcdp)
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
        if rel.selection is None and rel.unit is None:  # private groups: not read
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
        # a privacy-unit release charges every user, rows in its keys or not
        frame[f"__g{r}"] = (np.zeros(len(prepared), dtype=np.int64) if rel.unit is not None
                            else _key_index(prepared, rel))
    frame["__rem"] = prepared[REMAINING].to_numpy(np.int64)
    user_level = any(get_kind(a.kind).unit == "user" or a.bounds_users(job.input.user_id)
                     for rel in job.releases for a in rel.aggregators) or any(
        rel.unit is not None for rel in job.releases)
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
