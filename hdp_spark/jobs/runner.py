"""The job runner: validate -> check budgets -> compute -> write outputs -> charge the ledger.

One run of a job (``python -m hdp_spark.jobs run jobs/<job>.toml``):

1. **preflight** the public inputs (job file, schema, ledger path, the engine's Java) and
   **load** the input with the schema's column types (a malformed private cell reads as
   null);
2. **validate** it against its schema and check user ids and budgets; the counts go to a
   data-quality report beside the ledger (:func:`quality_dir`), never to outputs or to log
   lines above DEBUG; a failure of a public rule stops the run before any release, with
   nothing written but that report;
   then **open the ledger** and fingerprint the input with the ledger's MAC (the keyed
   fingerprint enters every idempotency key; see :mod:`hdp_spark.jobs.fingerprint`);
3. for each release, in order, under the ledger's write lock (a *session*):

   a. if the release's idempotency key (job, release id, input fingerprint, release
      definition) is committed already, **re-publish** the committed outcome: nothing is
      recomputed, no noise is drawn, nothing is charged;
   b. otherwise join the remaining budgets with the table and **cap** the ε columns
      (:mod:`hdp_spark.core.ledger`), **compute** the release (fresh noise, once),
      compute the **charges** from the effective ε of every (group, ε level) and **commit**
      the record (which holds the outcome) and the charges in one atomic step; then
      materialize the outputs from the record in a staging directory and publish them by one
      ``rename``;

4. write ``manifest.json`` and the report (remaining-budget distribution included).

Crash consistency: the ledger commit is the only commit point. Before it, nothing is
visible and no released value is on disk outside the ledger's own (trusted) storage; after
it, the outputs are a materialization of the committed record, re-created by the next run if
the crash hit between commit and publish. ``HDP_FAULT_AT=<stage>``
(:mod:`hdp_spark.jobs.faults`) kills the process at any stage to test this.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from hdp_spark.core.ledger import UNIT, BudgetPolicy, canonical_json, idempotency_key
from hdp_spark.errors import (
    BudgetExceededError,
    HdpError,
    InternalError,
    JobError,
    LedgerConflictError,
    LedgerDamagedError,
    StorageError,
)
from hdp_spark.jobs.engines import (
    AggCharge,
    BudgetDistribution,
    ChargeSummary,
    EngineAdapter,
    check_engine,
    make_adapter,
)
from hdp_spark.jobs.faults import fault_point
from hdp_spark.jobs.fingerprint import file_fingerprint, file_stats
from hdp_spark.jobs.outputs import (
    check_writable,
    cited,
    cleanup_staging,
    ensure_published,
    output_error,
    publish,
    stage,
)
from hdp_spark.jobs.outputs import write_manifest as _write_manifest
from hdp_spark.jobs.registry import KindResult, check_kind_result, get_kind
from hdp_spark.jobs.selection import (
    charge_table,
    clip_point,
    describe_selection,
    release_selected,
    selection_eps,
)
from hdp_spark.jobs.spec import EngineName, JobSpec, ReleaseSpec, load_job
from hdp_spark.jobs.values import plain
from hdp_spark.ledger import open_ledger
from hdp_spark.ledger._fs import atomic_write
from hdp_spark.ledger.base import CommitRecord, new_commit_id

__all__ = [
    "JobRun",
    "ReleaseRun",
    "quality_dir",
    "run_job",
    "typed",
]

log = logging.getLogger("hdp_spark.jobs")

_MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class ReleaseRun:
    """What happened to one release in a run.

    Attributes:
        release_id: the release.
        status: ``"committed"`` (computed and charged now) or ``"republished"`` (committed
            earlier; its stored outcome was published again, nothing charged).
        record: the ledger's commit record (its outcome is what was published).
        path: the published directory.
        seconds: wall time of the release.
    """

    release_id: str
    status: Literal["committed", "republished"]
    record: CommitRecord
    path: Path
    seconds: float

    @property
    def computed_by(self) -> str:
        """The engine that computed the release (``"pandas"`` or ``"spark"``): this run's
        for a release committed now, an earlier run's for a re-published one."""
        return str(self.record.outcome_data().get("engine", "unknown"))


@dataclass(frozen=True, slots=True)
class JobRun:
    """Result of :func:`run_job`.

    Attributes:
        job: the job that ran.
        fingerprint: the keyed input fingerprint (HMAC under the ledger's secret; for the
            operator, never published).
        releases: one entry per release, in job order.
        distribution: remaining/spent budgets of the input's users after the run (computed
            for the report; None when ``[output] report = false``).
        manifest: the output manifest.
        report: the Markdown report (None when disabled).
        stage_seconds: wall time per stage (``load``, ``validate``, ``release:<id>``, ...).
        allocation: the budget allocation of the releases this run computed (None with
            ``[budget] allocation = "sequential"``).
    """

    job: JobSpec
    fingerprint: str
    releases: tuple[ReleaseRun, ...]
    distribution: BudgetDistribution | None
    manifest: Path
    report: Path | None
    stage_seconds: Mapping[str, float] = field(default_factory=dict)
    allocation: AllocationSummary | None = None

    def values(self, release_id: str) -> list[dict[str, Any]]:
        """The published rows of a release (as committed)."""
        for r in self.releases:
            if r.release_id == release_id:
                rows: list[dict[str, Any]] = r.record.outcome_data()["rows"]
                return rows
        msg = f"`release_id` must be one of the job's releases; got {release_id!r}."
        raise JobError(msg)


class _Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str, timed_privately: bool = False) -> Iterator[None]:
        """Time a stage. ``timed_privately``: its time depends on private data beyond the
        public n (a partition-selection release: the candidate groups that are *not*
        released cost time too), so it is logged at DEBUG, never at INFO. Timing is outside
        the privacy model (docs/partition_selection.md); nothing at INFO carries it."""
        level = logging.DEBUG if timed_privately else logging.INFO
        log.log(level, "stage %s ...", name)
        t0 = time.perf_counter()
        yield
        took = time.perf_counter() - t0
        self.seconds[name] = self.seconds.get(name, 0.0) + took
        log.log(level, "stage %s done in %.2f s", name, took)


# -- helpers -------------------------------------------------------------------------------


def _definition(rel: ReleaseSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "by": list(rel.by),
        "keys": [list(k) for k in rel.keys] if rel.keys is not None else None,
        "aggregators": [
            {"kind": a.kind, **dict(get_kind(a.kind).describe(a.spec))} for a in rel.aggregators
        ],
    }
    if rel.selection is not None:  # only then: other releases keep their keys
        out["select_keys"] = describe_selection(rel.selection)
    return out


def _eps_columns(rel: ReleaseSpec) -> list[tuple[str, int]]:
    """The ε columns the budget rule caps, with how many aggregators read each.

    Post-processing kinds (``unit = "none"``, LDP aggregation) are left out: they charge
    nothing, and their ε must stay exact (the reports were randomized with it). A
    partition-selection release caps its one ε column once: its total demand is
    min(ε_i, c), whatever the number of aggregators (:mod:`hdp_spark.jobs.selection`).
    """
    if rel.selection is not None:
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


def _capped(
    adapter: EngineAdapter, prepared: Any, rel: ReleaseSpec, policy: BudgetPolicy
) -> Any:
    """The release's rows with their ε capped by the budget rule (and ``__status``).

    Kinds with one global ε per person (heavy hitters, attribute histograms) get a helper
    column holding their per-person ε demand on every row. Such a release holds only such
    kinds (checked when the job is loaded), and since a global ε cannot be lowered for one
    person, "cap" acts as "exclude" for it: a person whose remaining budget is below the
    demand gets ε 0 there, and :func:`_compute` leaves the person out of the release.
    """
    scoped = adapter.restrict(prepared, rel.by, rel.keys)
    if rel.selection is not None:  # demand min(ε, c): clip first (κ_i unchanged)
        col, grid = selection_eps(rel)
        scoped = adapter.clip_eps(scoped, col, clip_point(rel.selection, grid))
    person = _person_columns(rel)
    for col, eps in person:
        scoped = adapter.with_constant(scoped, col, eps)
    if person and policy == "cap":
        policy = "exclude"
    return adapter.cap(scoped, _eps_columns(rel), policy)


def _public_rows(adapter: EngineAdapter, prepared: Any, rel: ReleaseSpec) -> int:
    """Rows of the release with ε = +∞ in the data (public rows, capped or excluded by the
    budget rule like any row over budget); 0 for partition selection (clipped at c) and
    for one-global-ε kinds (their ε is a parameter)."""
    if rel.selection is not None:
        return 0
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
    if rel.selection is not None:
        # Public facts only: the parameters (δ per release) and the table-wide charge
        # classes [capped ε level, rows, κ] (the ε histogram); never the candidates, their
        # number or a group's n.
        extra["selection"] = {**describe_selection(rel.selection),
                              "charges": classes or []}
        for described in aggregators:  # a selected histogram: one list column, no bins
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


def _load(adapter: EngineAdapter, job: JobSpec) -> tuple[Any, Any]:
    """Load the input; returns the frame and the input files' stats (None for a table)."""
    spec = job.input
    if spec.path is None:
        return adapter.load(spec), None
    before = file_stats(spec.path)
    return adapter.load(spec), before


def _fingerprint(adapter: EngineAdapter, job: JobSpec, df: Any, before: Any, ledger: Any) -> str:
    """The input's keyed fingerprint: ``ledger.mac`` of an unkeyed digest that never leaves
    this process's memory.

    Computed once the input passed validation and the ledger is open (its secret is the
    MAC key). The files must not have changed since :func:`_load` read them.
    """
    spec = job.input
    if spec.path is None:
        return "table:" + str(ledger.mac(adapter.content_hash(df).encode()))
    extra = {"format": spec.resolved_format, "types": [list(t) for t in spec.types]}
    fingerprint = file_fingerprint(spec.path, spec.fingerprint, extra, ledger.mac)
    if file_stats(spec.path) != before:
        msg = (
            f"`[input] path` {str(spec.path)!r} changed while the job read it; run the job "
            "on a stable snapshot."
        )
        raise JobError(msg)
    return fingerprint


def quality_dir(job: JobSpec) -> Path:
    """Where the data-quality reports of a job go: ``quality/`` beside the ledger.

    ``<dir>/quality`` for a ledger at ``<dir>/ledger.sqlite`` or ``<dir>/ledger/`` (a
    parquet ledger): beside it, so that a run stopped by validation writes its report
    without creating the ledger. Like the ledger, it is for the trusted operator only.
    """
    return job.ledger.path.parent / "quality"


def _write_quality(job: JobSpec, quality: dict[str, Any]) -> Path:
    """Write the data-quality report (counts for the operator) beside the ledger."""
    directory = quality_dir(job)
    now = dt.datetime.now(dt.UTC)
    name = f"{job.name}-{now.strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}.json"
    doc = {"job": job.name, "checked_at": now.isoformat(), "engine": job.engine, **quality}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(directory / name, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise output_error(
            directory, "the data-quality report beside the ledger; nothing was charged", exc,
            what="the data-quality report directory",
        ) from exc
    log.debug("data-quality report written to %s", directory / name)
    return directory / name


def _open_ledger(job: JobSpec) -> Any:
    """Open the job's ledger and check it against the outputs that cite it.

    A ledger that is missing, empty, truncated or corrupt, or that is not the one (or is
    older than the one) the outputs under ``[output] path`` came from, is refused before
    anything is computed or charged: taking it as a fresh start would recompute committed
    releases with fresh noise (independent noisy copies of one statistic average the noise
    away) and forget their charges.

    Raises:
        LedgerDamagedError: see above (exit code 6).
        StorageError: the ledger cannot be created or written (exit code 7).
    """
    out = job.output.path
    ledger_ids, commit_ids = cited(out)
    ledger = open_ledger(
        job.ledger_backend, job.ledger.path, lock_timeout=job.ledger.lock_timeout,
        compact_every=job.ledger.compact_every, create=not (ledger_ids or commit_ids),
    )
    restore = 'restore the ledger from a backup (docs/jobs.md, "Backup and restore")'
    if ledger_ids and ledger.ledger_id not in ledger_ids:
        msg = (
            f"`[ledger] path` `{job.ledger.path}` is not the ledger the outputs in `{out}` "
            f"came from (they cite ledger {', '.join(sorted(ledger_ids))}; this one is "
            f"{ledger.ledger_id}): it was reset, replaced or re-created. Nothing was computed "
            f"or charged; {restore}."
        )
        raise LedgerDamagedError(msg)
    missing = commit_ids - ledger.commit_ids()
    if missing:
        msg = (
            f"`[ledger] path` `{job.ledger.path}` is older than the outputs in `{out}`: "
            f"{len(missing)} published commit(s) (e.g. {min(missing)}) are not in it "
            f"(restored from an older backup, or its newest commits were lost). Nothing was "
            f"computed or charged; {restore}."
        )
        raise LedgerDamagedError(msg)
    return ledger


def _check_ledger_location(job: JobSpec) -> None:
    """The ledger (secret, spends, quality reports) must not live under the output dir."""
    out = job.output.path.resolve()
    ledger = job.ledger.path.resolve()
    if ledger == out or out in ledger.parents or ledger in out.parents:
        msg = (
            f"`[ledger] path` must lie outside `[output] path` (the ledger holds its MAC "
            f"secret and per-user spend, which must never be published); got ledger "
            f"{str(job.ledger.path)!r} and output {str(job.output.path)!r}."
        )
        raise JobError(msg)


def _validate(adapter: EngineAdapter, df: Any, job: JobSpec) -> tuple[dict[str, Any], Path]:
    """Validate the input; write the counts to the operator's data-quality report.

    Returns:
        The data-quality counts (schema rule violations, user-id and budget checks) and the
        path of the report (written even when a rule stops the run).

    Privacy:
        Violation counts of value rules are functions of private data: they go to the
        quality report beside the ledger (and DEBUG logs), never to outputs or INFO+ logs.
        Only public rules (ε, user ids, row count, budgets) stop a run.
    """
    quality: dict[str, Any] = {"schema": None}
    try:
        _validate_into(adapter, df, job, quality)
    except BaseException:
        quality["release_blocked"] = True
        # the validation error is the one to report
        with contextlib.suppress(JobError, StorageError):
            _write_quality(job, quality)
        raise
    quality["release_blocked"] = False
    return quality, _write_quality(job, quality)


def _validate_into(adapter: EngineAdapter, df: Any, job: JobSpec, quality: dict[str, Any]) -> None:
    spec = job.input
    if spec.schema is not None:
        try:
            from hdp_spark.schema import load_schema
        except ImportError as exc:
            msg = (
                "`[input] schema` needs hdp_spark.schema (table schemas), which this "
                f"installation lacks; got {str(spec.schema)!r}."
            )
            raise JobError(msg) from exc
        report = adapter.validate(df, load_schema(spec.schema))
        quality["schema"] = report.to_dict()
        if not report.ok:
            # counts of private value rules: operator only (never INFO+, never outputs)
            log.debug("schema validation: rule violations (value rules never block; the "
                      "aggregators clamp or impute): %s", dict(report.violations))
        report.raise_for_release()
    check = adapter.check_input(df, spec.user_id, job.budget)
    quality["input"] = {
        "rows": check.rows,
        "null_user_ids": check.null_users,
        "duplicate_user_ids": check.duplicate_users,
        "invalid_budgets": check.invalid_budgets,
    }
    col = spec.user_id
    if check.null_users:
        msg = (
            f"`[input] user_id` column `{col}` must not be null; {check.null_users} row(s) "
            "break this rule."
        )
        raise JobError(msg)
    if check.duplicate_users:
        row_level = _row_level_kinds(job)
        if row_level:
            msg = (
                f"`[input] user_id` column `{col}` must be unique (one row per user) because "
                f"the job has row-level aggregators ({', '.join(row_level)}): they protect "
                "rows, so a user with k rows would lose up to k times their ε while the "
                "ledger charges once per user. Repeated user ids are allowed only when every "
                "aggregator of the job is user-level (`user_mean`) or charges nothing "
                f"(`ldp_mean`); {check.duplicate_users} row(s) repeat an id."
            )
            raise JobError(msg)
        if check.inconsistent_budgets:
            msg = (
                f"`[budget] column` `{job.budget.column}` must be the same on every row of a "
                "user (the capped ε of a user-level release must stay constant within the "
                f"user); {check.inconsistent_budgets} user(s) break this rule."
            )
            raise JobError(msg)
    if check.invalid_budgets:
        where = f"`[budget] column` `{job.budget.column}`" if job.budget.column else "budget"
        msg = (
            f"{where} must hold a finite budget in [0, 2**20] (or null with `[budget] "
            f"default`); {check.invalid_budgets} row(s) break this rule."
        )
        raise JobError(msg)
    log.info("input: %d row(s), user ids checked, budgets valid", check.rows)
    _expectations_into(adapter, df, job, quality)


def _row_level_kinds(job: JobSpec) -> list[str]:
    """Kinds of the job that need one row per user (all but user-level and charge-free)."""
    return sorted({
        a.kind for rel in job.releases for a in rel.aggregators
        if get_kind(a.kind).unit not in ("user", "none")
    })


def _expectations_into(
    adapter: EngineAdapter, df: Any, job: JobSpec, quality: dict[str, Any]
) -> None:
    """Run the schema's great-expectations suite (when the ``quality`` extra is installed).

    Its results go to the operator's data-quality report only (``quality["expectations"]``);
    they never block a release (value rules are handled by the aggregators) and never reach
    outputs or log lines above DEBUG.
    """
    if job.input.schema is None:
        return
    try:
        import great_expectations  # noqa: F401
    except ImportError:
        quality["expectations"] = {"skipped": "great_expectations is not installed"}
        return
    try:
        from hdp_spark.quality import run_expectations
        from hdp_spark.schema import load_schema

        gx_log = logging.getLogger("great_expectations")
        level = gx_log.level
        gx_log.setLevel(logging.WARNING)  # its INFO lines (temp dirs) are noise here
        try:
            quality["expectations"] = run_expectations(df, load_schema(job.input.schema))
        finally:
            gx_log.setLevel(level)
    except Exception as exc:  # the operator's report must never stop a release
        quality["expectations"] = {"error": type(exc).__name__}
        log.debug("great-expectations suite failed: %s", exc)


# -- budget allocation --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AllocationSummary:
    """The budget allocation of a run (``[budget] allocation`` other than sequential).

    Attributes:
        method: ``"equal"`` or ``"optimal"``.
        shares: per release computed in this run, the share of each user's budget left at
            the start of the run it may use.
        errors: the weighted predicted error of every method for these releases.
    """

    method: str
    shares: Mapping[str, float]
    errors: Mapping[str, float]


def _allocate(
    adapter: EngineAdapter, ledger: Any, df: Any, job: JobSpec, fingerprint: str
) -> tuple[Any, dict[str, float], AllocationSummary]:
    """Shares of the releases not committed yet, and ``df`` with each user's budget left
    now (``__start``, the base of the shares).

    Privacy:
        Computed from the public columns (ε, group keys, user ids, budgets), the ledger's
        spends and the releases' weights only (:mod:`hdp_spark.jobs.allocation`).
    """
    from hdp_spark.jobs.allocation import allocate
    from hdp_spark.jobs.planning import job_profile, release_models

    pending = tuple(
        rel for rel in job.releases
        if ledger.find(idempotency_key(job.name, rel.id, fingerprint, _definition(rel))) is None
    )
    prepared = adapter.prepare(df, job.input.user_id, job.budget, ledger.spent(adapter.io))
    if not pending:
        return adapter.keep_start(prepared), {}, AllocationSummary(
            job.budget.allocation, {}, {})
    sub = replace(job, releases=pending)
    models = release_models(sub)
    profile, _rows = job_profile(sub, adapter.public_frame(prepared, _public_of(sub)))
    policy, mode = job.budget.policy, job.budget.charge
    chosen = allocate(profile, models, job.budget.allocation, policy, mode)
    errors = {m: allocate(profile, models, m, policy, mode).error
              for m in ("sequential", "equal") if m != chosen.method}
    errors[chosen.method] = chosen.error
    shares = {m.id: s for m, s in zip(models, chosen.shares, strict=True)}
    log.info("budget allocation %s: shares %s", chosen.method,
             ", ".join(f"{k} {v:.4g}" for k, v in shares.items()))
    return adapter.keep_start(prepared), shares, AllocationSummary(
        chosen.method, shares, errors)


def _public_of(job: JobSpec) -> list[str]:
    from hdp_spark.jobs.planning import public_columns

    return public_columns(job)


# -- one release ----------------------------------------------------------------------------


def _run_release(
    adapter: EngineAdapter, ledger: Any, df: Any, job: JobSpec, rel: ReleaseSpec, fingerprint: str,
    timer: _Timer, share: float | None = None,
) -> ReleaseRun:
    key = idempotency_key(job.name, rel.id, fingerprint, _definition(rel))
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
                with timer.stage(f"{rel.id}:budgets", rel.selection is not None):
                    prepared = adapter.prepare(df, job.input.user_id, job.budget, session.spent())
                    if share is not None:  # the allocation's cap: see jobs/allocation.py
                        prepared = adapter.limit_remaining(prepared, share)
                    capped = _capped(adapter, prepared, rel, job.budget.policy)
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
                with timer.stage(f"{rel.id}:compute", rel.selection is not None):
                    if rel.selection is not None:
                        result, classes = _compute_selected(adapter, capped, job, rel)
                    else:
                        result = _compute(adapter, capped, job, rel)
                fault_point("computed", rel.id)
                with timer.stage(f"{rel.id}:charges", rel.selection is not None):
                    aggs = [
                        AggCharge(
                            get_kind(a.kind).eps_column(a.spec),
                            get_kind(a.kind).eps_grid(a.spec),
                            result.effective[get_kind(a.kind).output_name(a.spec)],
                            per_user=get_kind(a.kind).unit == "user",
                        )
                        for a in rel.aggregators if get_kind(a.kind).unit != "none"
                    ] if rel.selection is None else [
                        # one charge for the whole release: κ per ε level, every row
                        AggCharge(*selection_eps(rel), result.effective[""])
                    ]
                    charge_by = rel.by if rel.selection is None else ()
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
                with timer.stage(f"{rel.id}:commit", rel.selection is not None):
                    session.commit(
                        record, charges, before_commit=lambda: fault_point("charged", rel.id)
                    )
        except LedgerConflictError:
            if attempt == _MAX_ATTEMPTS:
                raise
            log.warning("release %s: ledger conflict (attempt %d); retrying", rel.id, attempt)
            continue
        fault_point("committed", rel.id)
        # Outputs are materialized only now: no noisy value of a release that might never be
        # committed (hence never charged) is ever written where readers of outputs look.
        with timer.stage(f"{rel.id}:publish", rel.selection is not None):
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


# -- public API ----------------------------------------------------------------------------


def _resolve(job: JobSpec | str | Path, engine: EngineName | None) -> JobSpec:
    if isinstance(job, JobSpec):
        return job.with_engine(engine) if engine else job
    return load_job(job, engine=engine)


def typed(spec: JobSpec) -> JobSpec:
    """The job with the column types its input is read with: the schema's, then numeric
    casts of the value columns the aggregators read (both enter the input fingerprint)."""
    if spec.input.schema is not None:
        try:
            from hdp_spark.schema import load_schema
        except ImportError as exc:
            msg = (
                "`[input] schema` needs hdp_spark.schema (table schemas), which this "
                f"installation lacks; got {str(spec.input.schema)!r}."
            )
            raise JobError(msg) from exc
        try:
            schema = load_schema(spec.input.schema)
        except HdpError as exc:
            msg = f"`[input] schema`: {exc}"
            raise JobError(msg) from exc
        spec = replace(spec, input=spec.input.with_schema_types(schema))
    numeric = [
        c for rel in spec.releases for a in rel.aggregators
        for c in get_kind(a.kind).numeric_columns(a.spec)
    ]
    spec = replace(spec, input=spec.input.with_value_types(numeric))
    return spec


def _preflight(spec: JobSpec, spark: Any) -> JobSpec:
    """Checks of public inputs that need no data, before anything is read or written.

    Loads the schema (its column types become casts on load), checks that the ledger path
    is of its backend's kind and that the engine can start (Java for Spark).
    """
    spec = typed(spec)
    if spec.budget.allocation != "sequential":
        from hdp_spark.jobs.planning import release_models

        release_models(spec)  # refuses kinds the allocation cannot predict, before any read
    _check_ledger_location(spec)
    spec.check_ledger_path()
    check_engine(spec.engine, spark, spec.spark_conf)
    return spec


def run_job(
    job: JobSpec | str | Path, *, engine: EngineName | None = None, spark: Any = None
) -> JobRun:
    """Run a release job: validate, check budgets, compute, publish, charge the ledger.

    Args:
        job: a :class:`~hdp_spark.jobs.spec.JobSpec` or the path of a TOML job file.
        engine: run on this engine instead of the job's.
        spark: the SparkSession to use (Spark engine; default: the active one or a new one
            configured from the job's ``[spark]`` table).

    Returns:
        A :class:`JobRun` (published paths, commit records, budget distribution).

    Raises:
        JobError: the job file or the input breaks a rule (nothing released).
        SchemaError: the input fails schema validation (nothing released).
        EngineUnavailableError: the engine cannot start (Spark without Java); raised
            before anything is read or written.
        BudgetExceededError: ``policy = "fail"`` and some user lacks budget.
        LedgerBusyError: another run held the ledger for longer than ``lock_timeout``.

    Privacy:
        Each release is charged to every user the effective ε it gave them (sequential
        composition), after capping ε at the user's remaining budget, so no user's total
        spend ever exceeds their budget, even with concurrent runs or crashes. A committed
        release is never recomputed: re-running it re-publishes the stored outcome (the
        noise is not redrawn, nothing is charged). The release key is never stored.
        Remaining budgets become part of the (public) ε vector of later releases. With
        ``[budget] allocation`` "equal" or "optimal", each release's cap is further limited
        to its share of the budget a user had left when the run started; the shares are
        computed from the public columns, budgets, spends and release weights only
        (:mod:`hdp_spark.jobs.allocation`), and the cap never exceeds what is left.

        Publication rule: everything written under ``[output] path`` (values, manifest,
        report, plots, file and directory names) and every log line at INFO or above is a
        DP value or a function of public facts (job settings, ε values, n, bounds, key sets,
        budgets). The input fingerprint and the idempotency key are keyed by the ledger's
        MAC secret and stay in the ledger; commit ids are random. Validation counts go to
        the data-quality report beside the ledger (:func:`quality_dir`).
    """
    # Public checks first: a failure here reads no data and writes nothing.
    spec = _preflight(_resolve(job, engine), spark)
    timer = _Timer()
    log.info("job %s: engine %s, ledger %s (%s), %d release(s)", spec.name, spec.engine,
             spec.ledger.path, spec.ledger_backend, len(spec.releases))
    if spec.unsafe_seed is not None:
        log.warning("job %s uses `unsafe_seed`: its noise is reproducible and NOT private",
                    spec.name)
    out = spec.output.path
    adapter = make_adapter(spec.engine, spark, spec.spark_conf)
    with timer.stage("load"):
        df, before = _load(adapter, spec)
    fault_point("loaded")
    with timer.stage("validate"):
        _validate(adapter, df, spec)
    fault_point("validated")
    # The ledger is opened once the input passed: its secret keys the input fingerprint.
    ledger = _open_ledger(spec)
    with timer.stage("fingerprint"):
        fingerprint = _fingerprint(adapter, spec, df, before, ledger)
    # The output directory appears only once the input passed every check, and must be
    # writable before anything is charged.
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(out, "before charging anything; nothing was charged", exc) from exc
    cleanup_staging(out)
    check_writable(out)
    shares: dict[str, float] = {}
    allocation = None
    if spec.budget.allocation != "sequential":
        with timer.stage("allocation"):
            df, shares, allocation = _allocate(adapter, ledger, df, spec, fingerprint)
    runs = []
    for rel in spec.releases:
        with timer.stage(f"release:{rel.id}", rel.selection is not None):
            runs.append(_run_release(adapter, ledger, df, spec, rel, fingerprint, timer,
                                     shares.get(rel.id)))
    with timer.stage("report"):
        manifest = _write_manifest(
            out, spec.name,
            {
                r.release_id: {
                    "commit_id": r.record.commit_id,
                    "committed_at": r.record.committed_at,
                    "path": str(r.path.relative_to(out)),
                    "values": str((r.path / "values.parquet").relative_to(out)),
                    "computed_by": r.computed_by,
                }
                for r in runs
            },
            ledger.ledger_id,
        )
        report, distribution = None, None
        if spec.output.report:
            from hdp_spark.report import write_report

            spent = ledger.spent(adapter.io)
            distribution = adapter.distribution(
                adapter.prepare(df, spec.input.user_id, spec.budget, spent),
                spec.budget.default if spec.budget.column is None else None,
            )
            report = write_report(out, spec, runs, distribution, allocation=allocation)
    fault_point("reported")
    log.info("job %s done: %d committed, %d re-published", spec.name,
             sum(r.status == "committed" for r in runs),
             sum(r.status == "republished" for r in runs))
    return JobRun(spec, fingerprint, tuple(runs), distribution, manifest, report,
                  dict(timer.seconds), allocation)
