"""Before a job reads private data: its public checks, its input and its ledger.

:func:`preflight` checks the public inputs (job file, schema, ledger path, the engine's
Java) before anything is read or written; :func:`load` reads the input with the schema's
column types; :func:`open_job_ledger` opens the ledger and checks it against the outputs
that cite it; :func:`input_fingerprint` keys the input's digest with the ledger's MAC.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from hdp_spark.errors import HdpError, JobError, LedgerDamagedError
from hdp_spark.jobs.adapter import EngineAdapter
from hdp_spark.jobs.engines import check_engine
from hdp_spark.jobs.fingerprint import file_fingerprint, file_stats
from hdp_spark.jobs.job_model import release_models
from hdp_spark.jobs.outputs import check_output_location, cited
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.spec import EngineName, JobSpec, load_job
from hdp_spark.ledger import open_ledger
from hdp_spark.ledger.witness import Witness

__all__ = ["advance_witness", "input_fingerprint", "load", "open_job_ledger", "preflight",
           "resolve", "typed"]

log = logging.getLogger("hdp_spark.jobs")


def load(adapter: EngineAdapter, job: JobSpec) -> tuple[Any, Any]:
    """Load the input; returns the frame and the input files' stats (None for a table).

    Privacy:
        Reads the input; a malformed private cell reads as null (the read never fails on a
        value).
    """
    spec = job.input
    if spec.path is None:
        return adapter.load(spec), None
    before = file_stats(spec.path)
    return adapter.load(spec), before


def input_fingerprint(
    adapter: EngineAdapter, job: JobSpec, df: Any, before: Any, ledger: Any
) -> str:
    """The input's keyed fingerprint: ``ledger.mac`` of an unkeyed digest that never leaves
    this process's memory.

    Computed once the input passed validation and the ledger is open (its secret is the
    MAC key). The files must not have changed since :func:`load` read them.

    Privacy:
        Keyed by the ledger's MAC secret; for the operator and the idempotency keys, never
        published.
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


def open_job_ledger(job: JobSpec, *, catch_up: bool = False) -> Any:
    """Open the job's ledger and check it against the outputs that cite it and against its
    rollback witness (``[ledger] witness``; without one, a WARNING says that a rollback
    cannot be detected). ``catch_up`` (a run): create a missing witness, or advance one
    that lags behind the ledger (a crash between a commit and its witness write).

    A ledger that is missing, empty, truncated or corrupt, or that is not the one (or is
    older than the one) the outputs under ``[output] path`` came from, is refused before
    anything is computed or charged: taking it as a fresh start would recompute committed
    releases with fresh noise (independent noisy copies of one statistic average the noise
    away) and forget their charges.

    Raises:
        LedgerDamagedError: see above (exit code 6).
        StorageError: the ledger cannot be created or written (exit code 7).

    Privacy:
        Refuses a damaged or replaced ledger before anything is computed or charged.
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
    if job.ledger.witness is None:
        log.warning("ledger %s has no witness (`[ledger] witness`): a rollback (the ledger "
                    "restored together with its outputs) cannot be detected", job.ledger.path)
        return ledger
    witness = Witness(job.ledger.witness)
    status = witness.check(ledger)
    if catch_up and (status.witnessed is None or status.lag):
        status = witness.advance(ledger)
    log.debug("ledger witness %s: %s commit(s) witnessed, %d in the ledger", witness.path,
              status.witnessed, status.commits)
    return ledger


def advance_witness(job: JobSpec, ledger: Any) -> None:
    """After a commit, before its outputs are published: record the ledger's new history
    in the job's witness (no-op without one). See :mod:`hdp_spark.ledger.witness` for why
    this order is the safe one.

    Raises:
        LedgerDamagedError: the ledger went back behind its witness meanwhile.
        StorageError: the witness cannot be written (the release stays committed; the next
            run publishes it and catches the witness up).

    Privacy:
        Writes counts, the ledger id and MACs under the ledger's secret; nothing from data.
    """
    if job.ledger.witness is not None:
        Witness(job.ledger.witness).advance(ledger)


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
    witness = job.ledger.witness
    if witness is not None and (witness.resolve() == out or out in witness.resolve().parents):
        msg = (
            f"`[ledger] witness` must lie outside `[output] path` (it is for the operator, "
            f"never published); got {str(witness)!r}."
        )
        raise JobError(msg)


def resolve(job: JobSpec | str | Path, engine: EngineName | None) -> JobSpec:
    """The job as a :class:`JobSpec` (read from its file), on ``engine`` if given.

    Privacy:
        Reads the job file only (public).
    """
    if isinstance(job, JobSpec):
        return job.with_engine(engine) if engine else job
    return load_job(job, engine=engine)


def typed(spec: JobSpec) -> JobSpec:
    """The job with the column types its input is read with: the schema's, then numeric
    casts of the value columns the aggregators read (both enter the input fingerprint).

    Privacy:
        Column types come from the schema and the job file (public), never from the data.
    """
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


def preflight(spec: JobSpec, spark: Any) -> JobSpec:
    """Checks of public inputs that need no data, before anything is read or written.

    Loads the schema (its column types become casts on load), checks that the ledger path
    is of its backend's kind, that the output path is not a file (or under one) and that the
    engine can start (Java for Spark).

    Privacy:
        Reads no data and writes nothing.
    """
    spec = typed(spec)
    if spec.budget.allocation != "sequential":
        release_models(spec)  # refuses kinds the allocation cannot predict, before any read
    _check_ledger_location(spec)
    spec.check_ledger_path()
    check_output_location(spec.output.path)
    check_engine(spec.engine, spark, spec.spark_conf)
    return spec
