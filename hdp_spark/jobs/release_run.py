"""One release of a job, from the budget rule to the published outputs.

Under the ledger's write lock (a *session*): if the release's idempotency key is committed
already, **re-publish** the committed outcome (nothing recomputed, no noise drawn, nothing
charged); otherwise join the remaining budgets with the table and **cap** the ε columns
(:mod:`hdp_spark.core.ledger`), **compute** the release (fresh noise, once; every kind
through the core pipeline on the adapter's engine), compute the **charges** from the
effective ε of every (group, ε level) and **commit** the record (which holds the outcome)
and the charges in one atomic step; then materialize the outputs from the record in a
staging directory and publish them by one ``rename``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hdp_spark.core.ledger import UNIT, BudgetPolicy, canonical_json, idempotency_key
from hdp_spark.errors import BudgetExceededError, InternalError, LedgerConflictError
from hdp_spark.jobs.adapter import AggCharge, ChargeSummary, EngineAdapter
from hdp_spark.jobs.charging import release_policy
from hdp_spark.jobs.faults import fault_point
from hdp_spark.jobs.outputs import ensure_published, output_error, publish, stage
from hdp_spark.jobs.preflight import advance_witness
from hdp_spark.jobs.progress import Progress
from hdp_spark.jobs.registry import KindResult, check_kind_result, get_kind
from hdp_spark.jobs.results import ReleaseRun
from hdp_spark.jobs.selection import (
    charge_table,
    clip_point,
    describe_selection,
    release_selected,
    selection_eps,
)
from hdp_spark.jobs.spec import JobSpec, ReleaseSpec
from hdp_spark.jobs.unit import describe_unit, release_unit, unit_charge_table, unit_parameters
from hdp_spark.jobs.values import plain
from hdp_spark.ledger.base import CommitRecord, new_commit_id

__all__ = ["Timer", "capped_table", "definition", "run_release"]

log = logging.getLogger("hdp_spark.jobs")


_MAX_ATTEMPTS = 3


class Timer:
    """Wall time per stage of a run, logged at DEBUG (``stage <name> done in <s> s``); a
    stage given a ``shown`` name is also announced to the run's :class:`Progress`.

    Timing is outside the privacy model (docs/partition_selection.md: a selection
    release's time grows with its unreleased candidate groups), so no timing is logged at
    INFO or above, and the progress bar shows no timings.
    """

    def __init__(self, progress: Progress | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.progress = progress or Progress()

    @contextmanager
    def stage(self, name: str, *, shown: str | None = None) -> Iterator[None]:
        """Time stage ``name`` (announced to the progress as ``shown`` if given)."""
        if shown is not None:
            self.progress.stage(shown)
        log.debug("stage %s ...", name)
        t0 = time.perf_counter()
        yield
        took = time.perf_counter() - t0
        self.seconds[name] = self.seconds.get(name, 0.0) + took
        log.debug("stage %s done in %.2f s", name, took)


def definition(rel: ReleaseSpec) -> dict[str, Any]:
    """The release's definition: its part of the idempotency key.

    Privacy:
        A function of the job file (public).
    """
    out: dict[str, Any] = {
        "by": list(rel.by),
        "keys": [list(k) for k in rel.keys] if rel.keys is not None else None,
        "aggregators": [
            {"kind": a.kind, **dict(get_kind(a.kind).describe(a.spec))} for a in rel.aggregators
        ],
    }
    if rel.selection is not None:  # only then: other releases keep their keys
        out["select_keys"] = describe_selection(rel.selection)
    if rel.unit is not None:
        out["privacy_unit"] = describe_unit(rel)
    return out


def _eps_columns(rel: ReleaseSpec) -> list[tuple[str, int]]:
    """The ε columns the budget rule caps, with how many aggregators read each.

    Post-processing kinds (``unit = "none"``, LDP aggregation) are left out: they charge
    nothing, and their ε must stay exact (the reports were randomized with it). A
    partition-selection release caps its one ε column once: its total demand is
    min(ε_i, c), whatever the number of aggregators (:mod:`hdp_spark.jobs.selection`).
    """
    if rel.selection is not None or rel.unit is not None:
        return [(selection_eps(rel)[0], 1)]
    counts: dict[str, int] = {}
    for a in rel.aggregators:
        kind = get_kind(a.kind)
        if kind.unit == "none":
            continue
        col = kind.eps_column(a.spec)
        counts[col] = counts.get(col, 0) + 1
    return list(counts.items())


def _person_columns(rel: ReleaseSpec) -> list[tuple[str, float]]:
    """Helper ε columns of the release's one-global-ε kinds (``unit = "person"``)."""
    return [
        (get_kind(a.kind).eps_column(a.spec), get_kind(a.kind).uniform_eps(a.spec))
        for a in rel.aggregators if get_kind(a.kind).unit == "person"
    ]


def capped_table(
    adapter: EngineAdapter, prepared: Any, rel: ReleaseSpec, policy: BudgetPolicy
) -> Any:
    """The release's rows with their ε capped by the budget rule (and ``__status``).

    Kinds with one global ε per person (heavy hitters, attribute histograms) get a helper
    column holding their per-person ε demand on every row. Such a release holds only such
    kinds (checked when the job is loaded), and since a global ε cannot be lowered for one
    person, "cap" acts as "exclude" for it: a person whose remaining budget is below the
    demand gets ε 0 there, and :func:`_compute` leaves the person out of the release.

    Privacy:
        Caps each row's ε at the user's remaining budget, so no charge exceeds a budget.
    """
    # a privacy-unit release reads (and charges) every user: whether a person has rows
    # in the public keys is private; its agg call drops the rows outside them
    scoped = prepared if rel.unit is not None else adapter.restrict(prepared, rel.by, rel.keys)
    if rel.selection is not None and rel.unit is None:  # demand min(ε, c): clip first
        # (κ_i unchanged); under a unit the charge saturates by itself (jobs/unit.py)
        col, grid = selection_eps(rel)
        scoped = adapter.clip_eps(scoped, col, clip_point(rel.selection, grid))
    if rel.unit is not None:
        # the person's ε (the smallest of their rows) on every row: what the release
        # spends, hence what the budget rule caps and the ledger charges (once per user)
        scoped = adapter.person_eps(scoped, selection_eps(rel)[0])
    person = _person_columns(rel)
    for col, eps in person:
        scoped = adapter.with_constant(scoped, col, eps)
    return adapter.cap(scoped, _eps_columns(rel), release_policy(policy, bool(person)))


def _public_rows(adapter: EngineAdapter, prepared: Any, rel: ReleaseSpec) -> int:
    """Rows of the release with ε = +∞ in the data (public rows, capped or excluded by the
    budget rule like any row over budget); 0 for partition selection (clipped at c) and
    for one-global-ε kinds (their ε is a parameter)."""
    if rel.selection is not None or rel.unit is not None:
        return 0  # under a privacy unit a row count is private: not published
    helpers = {c for c, _ in _person_columns(rel)}
    columns = [c for c, _ in _eps_columns(rel) if c not in helpers]
    return int(adapter.count_public(adapter.restrict(prepared, rel.by, rel.keys), columns))


def _compute(adapter: EngineAdapter, df: Any, job: JobSpec, rel: ReleaseSpec) -> KindResult:
    """Run every kind of the release once on the capped table; merge rows by key."""
    by_kind: dict[str, list[Any]] = {}
    for a in rel.aggregators:
        by_kind.setdefault(a.kind, []).append(a.spec)
    person = _person_columns(rel)
    if person:
        # One global ε per person: persons without budget for it are not read at all
        # (their status is not FULL after the budget rule; charged 0).
        df = adapter.only_full(df)
    table = adapter.release_input(df, [c for c, _ in person])
    n_keys = len(rel.keys) if rel.keys is not None else 1
    rows: list[dict[str, Any]] | None = None
    effective: dict[str, Any] = {}
    tau: dict[str, Any] = {}
    for kind_name, specs in by_kind.items():
        kind = get_kind(kind_name)
        seed = f"{job.unsafe_seed}/{rel.id}/{kind_name}" if job.unsafe_seed else None
        result = kind.release(adapter, table, specs, rel.by, rel.keys, seed)
        check_kind_result(kind_name, result, n_keys)
        if rows is None:
            rows = [dict(r) for r in result.rows]
        else:
            for mine, theirs in zip(rows, result.rows, strict=True):
                mine.update(theirs)
        effective.update(result.effective)
        tau.update(result.tau)
    return KindResult(rows or [], effective, tau)


def _compute_selected(
    adapter: EngineAdapter, df: Any, job: JobSpec, rel: ReleaseSpec
) -> tuple[KindResult, list[list[float]]]:
    """A partition-selection release: all its aggregators in one ``agg`` call.

    Returns the released rows (released groups only, sorted) with the charge table
    ``effective[""]`` = {((), ε level): κ} covering EVERY ε level of the capped table, so
    every row is charged, its group released or not; and the table-wide charge classes
    ``[ε level, rows, κ]`` for the outcome (functions of the public ε column only).
    """
    assert rel.selection is not None
    seed = f"{job.unsafe_seed}/{rel.id}/select_keys" if job.unsafe_seed else None
    col, grid = selection_eps(rel)
    levels = adapter.level_counts(df, col, grid)
    rows = release_selected(adapter, adapter.release_input(df), rel, seed)
    table = charge_table(rel.selection, [lv for lv, _ in levels])
    classes = [[lv, float(n), table[((), lv)]] for lv, n in levels]
    return KindResult(rows, {"": table}, {}), classes


def _compute_unit(
    adapter: EngineAdapter, df: Any, job: JobSpec, rel: ReleaseSpec
) -> tuple[KindResult, list[list[float]]]:
    """A privacy-unit release: all its aggregators in one ``agg`` call, with the charge
    table ``effective[""]`` = {((), ε level): a person's charge} over every ε level of the
    capped table (charged once per user), and the charge classes ``[ε level, charge]`` for
    the outcome (no row counts: under a privacy unit they are private).
    """
    seed = f"{job.unsafe_seed}/{rel.id}/privacy_unit" if job.unsafe_seed else None
    col, grid = selection_eps(rel)
    levels = [lv for lv, _ in adapter.level_counts(df, col, grid)]
    rows = release_unit(adapter, adapter.release_input(df), rel, seed)
    table = unit_charge_table(unit_parameters(rel), levels)
    return KindResult(rows, {"": table}, {}), [[lv, table[((), lv)]] for lv in levels]


def _outcome(
    job: JobSpec, rel: ReleaseSpec, result: KindResult, summary: ChargeSummary,
    classes: list[list[float]] | None = None, public_rows: int = 0,
) -> str:
    aggregators = []
    for a in rel.aggregators:
        kind = get_kind(a.kind)
        aggregators.append(
            {"kind": a.kind, "name": kind.output_name(a.spec),
             "definition": dict(kind.describe(a.spec)),
             "intervals": [[i.label, i.estimate, i.low, i.high] for i in kind.intervals(a.spec)],
             **({"unit": a.unit} if a.unit else {})}
        )
    tau = {
        name: [[plain(list(key)), t] for key, t in per.items()]
        for name, per in result.tau.items()
    }
    extra: dict[str, Any] = {}
    if rel.selection is not None and rel.unit is None:
        # Public facts only: the parameters (δ per release) and the table-wide charge
        # classes [capped ε level, rows, κ] (the ε histogram); never the candidates, their
        # number or a group's n.
        extra["selection"] = {**describe_selection(rel.selection),
                              "charges": classes or []}
        for described in aggregators:  # a selected histogram: one list column, no bins
            if described["kind"] == "histogram":
                described["intervals"] = []
    if rel.unit is not None:
        # Public facts only: the bounds and parameters (δ under select_keys) and [ε
        # level, a person's charge]; never a row count (private when people have many
        # rows) nor the number of candidate groups.
        extra["privacy_unit"] = {**describe_unit(rel), "charges": classes or []}
        for described in aggregators:
            if described["kind"] == "histogram":
                described["intervals"] = []
    return canonical_json(
        {
            **extra,
            "engine": job.engine,
            "by": list(rel.by),
            "aggregators": aggregators,
            "rows": plain(result.rows),
            "tau": tau,
            "budget": {
                "policy": job.budget.policy,
                "charge": job.budget.charge,
                "rows_in_release": summary.rows_in_release,
                "users_charged": summary.users_charged,
                "units_charged": summary.units_charged,
                "eps_charged_total": summary.units_charged * UNIT,
                "eps_charged_max": summary.units_max * UNIT,
                "users_capped": summary.users_capped,
                "users_excluded": summary.users_excluded,
                # rows with ε = +inf in the data (public rows; the ε column is public):
                # always capped or excluded, since budgets are finite
                "public_rows": public_rows,
                **({"delta": float(rel.selection.delta)} if rel.selection is not None
                   else {}),
            },
            "unsafe_seed": job.unsafe_seed is not None,
        }
    )


def run_release(
    adapter: EngineAdapter, ledger: Any, df: Any, job: JobSpec, rel: ReleaseSpec, fingerprint: str,
    timer: Timer, share: float | None = None,
) -> ReleaseRun:
    """Run one release under the ledger's lock: re-publish it if committed, otherwise cap,
    compute, charge, commit and publish it (see the module's docstring). The frames the
    release pins (its budget table, its per-user charges) are released at its end.

    Raises:
        BudgetExceededError: ``[budget] policy = "fail"`` and some user lacks budget.
        LedgerConflictError: the ledger changed under the run three times in a row.

    Privacy:
        Computes and charges a release once; a committed release is re-published, never
        recomputed. Outputs are written only after the commit.
    """
    try:
        return _run_release(adapter, ledger, df, job, rel, fingerprint, timer, share)
    finally:
        adapter.unpin()


def _run_release(
    adapter: EngineAdapter, ledger: Any, df: Any, job: JobSpec, rel: ReleaseSpec, fingerprint: str,
    timer: Timer, share: float | None,
) -> ReleaseRun:
    """:func:`run_release` without the unpinning."""
    key = idempotency_key(job.name, rel.id, fingerprint, definition(rel))
    out = job.output.path
    t0 = time.perf_counter()

    def republish(record: CommitRecord) -> ReleaseRun:
        try:
            path = ensure_published(out, record, ledger.ledger_id)
        except OSError as exc:
            raise output_error(out, "re-publishing a committed release", exc) from exc
        log.info("release %s: already committed as %s (computed earlier by engine %s); "
                 "re-published, nothing charged", rel.id, record.commit_id,
                 record.outcome_data().get("engine", "unknown"))
        return ReleaseRun(rel.id, "republished", record, path, time.perf_counter() - t0)

    found = ledger.find(key)
    if found is not None:
        return republish(found)
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        try:
            with ledger.session(adapter.io) as session:
                fault_point("locked", rel.id)
                found = session.find(key)
                if found is not None:
                    return republish(found)
                with timer.stage(f"{rel.id}:budgets"):
                    prepared = adapter.prepare(df, job.input.user_id, job.budget, session.spent())
                    if share is not None:  # the allocation's cap: see jobs/allocation.py
                        prepared = adapter.limit_remaining(prepared, share)
                    # its join with the spend runs once, not in every query of the release
                    prepared = adapter.pin(prepared)
                    capped = capped_table(adapter, prepared, rel, job.budget.policy)
                    public_rows = _public_rows(adapter, prepared, rel)
                    if job.budget.policy == "fail":
                        over = adapter.count_over(capped)
                        if over:
                            msg = (
                                f"release `{rel.id}`: {over} user(s) have less remaining "
                                "budget than the release demands (`[budget] policy` = "
                                "'fail'); nothing was released or charged."
                            )
                            raise BudgetExceededError(msg)
                fault_point("budgets_checked", rel.id)
                classes = None
                with timer.stage(f"{rel.id}:compute"):
                    if rel.unit is not None:  # with or without select_keys
                        result, classes = _compute_unit(adapter, capped, job, rel)
                    elif rel.selection is not None:
                        result, classes = _compute_selected(adapter, capped, job, rel)
                    else:
                        result = _compute(adapter, capped, job, rel)
                fault_point("computed", rel.id)
                with timer.stage(f"{rel.id}:charges"):
                    aggs = [
                        AggCharge(
                            get_kind(a.kind).eps_column(a.spec),
                            get_kind(a.kind).eps_grid(a.spec),
                            result.effective[get_kind(a.kind).output_name(a.spec)],
                            # user-level, or a partial-DP kind counting each user
                            # with all their rows: charged once per user
                            per_user=(get_kind(a.kind).unit == "user"
                                      or a.bounds_users(job.input.user_id)),
                        )
                        for a in rel.aggregators if get_kind(a.kind).unit != "none"
                    ] if rel.selection is None and rel.unit is None else [
                        # one charge for the whole release: κ per ε level, every row
                        # (partition selection) or once per user (privacy unit)
                        AggCharge(*selection_eps(rel), result.effective[""],
                                  per_user=rel.unit is not None)
                    ]
                    charge_by = rel.by if rel.selection is None and rel.unit is None else ()
                    charges, summary = adapter.charges(capped, charge_by, aggs,
                                                       job.budget.charge)
                if summary.overspent:
                    msg = (
                        f"release `{rel.id}`: {summary.overspent} user(s) would be charged "
                        "above their remaining budget; refusing to commit"
                    )
                    raise InternalError(msg)
                record = CommitRecord(
                    key=key, job=job.name, release_id=rel.id, fingerprint=fingerprint,
                    committed_at=dt.datetime.now(dt.UTC).isoformat(),
                    outcome=_outcome(job, rel, result, summary, classes, public_rows),
                    users_charged=summary.users_charged, units_charged=summary.units_charged,
                    commit_id=new_commit_id(),  # random: names the published directory
                )
                with timer.stage(f"{rel.id}:commit"):
                    session.commit(
                        record, charges, before_commit=lambda: fault_point("charged", rel.id)
                    )
        except LedgerConflictError:
            if attempt == _MAX_ATTEMPTS:
                raise
            log.warning("release %s: ledger conflict (attempt %d); retrying", rel.id, attempt)
            continue
        fault_point("committed", rel.id)
        advance_witness(job, ledger)  # after the commit, before any output: see its docs
        fault_point("witnessed", rel.id)
        # Outputs are materialized only now: no noisy value of a release that might never be
        # committed (hence never charged) is ever written where readers of outputs look.
        with timer.stage(f"{rel.id}:publish"):
            try:
                staged = stage(out, record, ledger.ledger_id)
                fault_point("staged", rel.id)
                path = publish(out, staged, record)
            except OSError as exc:
                raise output_error(
                    out, "after the ledger commit: the release is charged, and the next run "
                    "publishes it from the ledger", exc,
                ) from exc
        fault_point("published", rel.id)
        log.info(
            "release %s: committed %s; %d user(s) charged, ε %.4g in total (max %.4g); "
            "%d capped, %d excluded",
            rel.id, record.commit_id, summary.users_charged, summary.units_charged * UNIT,
            summary.units_max * UNIT, summary.users_capped, summary.users_excluded,
        )
        return ReleaseRun(rel.id, "committed", record, path, time.perf_counter() - t0)
    msg = "release loop ended without a result"
    raise InternalError(msg)
