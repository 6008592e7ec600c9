"""The job runner: validate -> check budgets -> compute -> write outputs -> charge the ledger.

One run of a job (``python -m hdp_spark.jobs run jobs/<job>.toml``):

The stages live in their own modules: :mod:`~hdp_spark.jobs.preflight` (public checks,
load, ledger, fingerprint), :mod:`~hdp_spark.jobs.validation` (data quality),
:mod:`~hdp_spark.jobs.release_run` (one release), :mod:`~hdp_spark.jobs.allocation` (budget
shares); this module runs them in order.

1. **preflight** the public inputs (job file, schema, ledger path, the engine's Java) and
   **load** the input with the schema's column types (a malformed private cell reads as
   null);
2. **validate** it against its schema and check user ids and budgets; the counts go to a
   data-quality report beside the ledger (:func:`quality_dir`), never to outputs or to log
   lines above DEBUG; a failure of a public rule stops the run before any release, with
   nothing written but that report;
   then **open the ledger** and fingerprint the input with the ledger's MAC (the keyed
   fingerprint enters every idempotency key; see :mod:`hdp_spark.jobs.fingerprint`);
3. for each release, in order, :func:`~hdp_spark.jobs.release_run.run_release` under the
   ledger's write lock: re-publish a committed release, or cap, compute, charge, commit
   and publish a new one;

4. write ``manifest.json`` and the report (remaining-budget distribution included).

Crash consistency: the ledger commit is the only commit point. Before it, nothing is
visible and no released value is on disk outside the ledger's own (trusted) storage; after
it, the outputs are a materialization of the committed record, re-created by the next run if
the crash hit between commit and publish. ``HDP_FAULT_AT=<stage>``
(:mod:`hdp_spark.jobs.faults`) kills the process at any stage to test this.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from hdp_spark.core.ledger import idempotency_key
from hdp_spark.jobs.adapter import EngineAdapter
from hdp_spark.jobs.allocation import allocate
from hdp_spark.jobs.engines import make_adapter
from hdp_spark.jobs.faults import fault_point
from hdp_spark.jobs.job_model import job_profile, public_columns, release_models
from hdp_spark.jobs.outputs import (
    check_writable,
    cleanup_staging,
    output_error,
)
from hdp_spark.jobs.outputs import write_manifest as _write_manifest
from hdp_spark.jobs.preflight import (
    input_fingerprint,
    load,
    open_job_ledger,
    preflight,
    resolve,
    typed,
)
from hdp_spark.jobs.progress import Progress
from hdp_spark.jobs.release_run import Timer, definition, run_release
from hdp_spark.jobs.results import AllocationSummary, JobRun, ReleaseRun
from hdp_spark.jobs.spec import EngineName, JobSpec
from hdp_spark.jobs.validation import quality_dir, validate

__all__ = [
    "AllocationSummary",
    "JobRun",
    "ReleaseRun",
    "quality_dir",
    "run_job",
    "typed",
]

log = logging.getLogger("hdp_spark.jobs")



def _allocate(
    adapter: EngineAdapter, ledger: Any, df: Any, job: JobSpec, fingerprint: str
) -> tuple[Any, dict[str, float], AllocationSummary]:
    """Shares of the releases not committed yet, and ``df`` with each user's budget left
    now (``__start``, the base of the shares).

    Privacy:
        Computed from the public columns (ε, group keys, user ids, budgets), the ledger's
        spends and the releases' weights only (:mod:`hdp_spark.jobs.allocation`).
    """
    pending = tuple(
        rel for rel in job.releases
        if ledger.find(idempotency_key(job.name, rel.id, fingerprint, definition(rel))) is None
    )
    prepared = adapter.prepare(df, job.input.user_id, job.budget, ledger.spent(adapter.io))
    if not pending:
        return adapter.keep_start(prepared), {}, AllocationSummary(
            job.budget.allocation, {}, {})
    sub = replace(job, releases=pending)
    models = release_models(sub)
    profile, _rows = job_profile(sub, adapter.public_frame(prepared, public_columns(sub)))
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


# -- public API ----------------------------------------------------------------------------


def run_job(
    job: JobSpec | str | Path, *, engine: EngineName | None = None, spark: Any = None,
    progress: Progress | None = None,
) -> JobRun:
    """Run a release job: validate, check budgets, compute, publish, charge the ledger.

    Args:
        job: a :class:`~hdp_spark.jobs.spec.JobSpec` or the path of a TOML job file.
        engine: run on this engine instead of the job's.
        spark: the SparkSession to use (Spark engine; default: the active one or a new one
            configured from the job's ``[spark]`` table).
        progress: told of each top-level stage (the command line passes a progress bar
            when stderr is a terminal); default: nothing shown. Stage timings are DEBUG
            log lines of the ``hdp_spark.jobs`` logger.

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
    spec = preflight(resolve(job, engine), spark)
    shown = progress or Progress()
    shown.begin(5 + len(spec.releases) + (spec.budget.allocation != "sequential"))
    try:
        return _run(spec, spark, shown)
    finally:
        shown.end()


def _run(spec: JobSpec, spark: Any, progress: Progress) -> JobRun:
    """The stages of :func:`run_job` after its public checks, each announced to
    ``progress``."""
    timer = Timer(progress)
    log.info("job %s: engine %s, ledger %s (%s), %d release(s)", spec.name, spec.engine,
             spec.ledger.path, spec.ledger_backend, len(spec.releases))
    if spec.unsafe_seed is not None:
        log.warning("job %s uses `unsafe_seed`: its noise is reproducible and NOT private",
                    spec.name)
    out = spec.output.path
    with timer.stage("engine", shown=f"starting the {spec.engine} engine"):
        adapter = make_adapter(spec.engine, spark, spec.spark_conf)
    with timer.stage("load", shown="loading the input"):
        df, before = load(adapter, spec)
    fault_point("loaded")
    with timer.stage("validate", shown="validating the input"):
        validate(adapter, df, spec)
    fault_point("validated")
    # The ledger is opened once the input passed: its secret keys the input fingerprint.
    ledger = open_job_ledger(spec, catch_up=True)
    with timer.stage("fingerprint", shown="fingerprinting the input"):
        fingerprint = input_fingerprint(adapter, spec, df, before, ledger)
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
        with timer.stage("allocation", shown="allocating budgets"):
            df, shares, allocation = _allocate(adapter, ledger, df, spec, fingerprint)
    runs = []
    for rel in spec.releases:
        with timer.stage(f"release:{rel.id}", shown=f"release {rel.id}"):
            runs.append(run_release(adapter, ledger, df, spec, rel, fingerprint, timer,
                                     shares.get(rel.id)))
    with timer.stage("report", shown="writing the report"):
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
