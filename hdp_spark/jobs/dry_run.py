"""Dry runs: what :func:`~hdp_spark.jobs.runner.run_job` would do, without doing it.

:func:`check_job` (``hdp-release check``) validates the input and shows each release's
budget situation; :func:`committed_releases` tells which releases a run would re-publish
(``hdp-release plan`` marks them). Neither writes anything: no ledger is created or
changed, no data-quality report or other file is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hdp_spark.core.ledger import idempotency_key
from hdp_spark.jobs.engines import make_adapter
from hdp_spark.jobs.fingerprint import file_stats
from hdp_spark.jobs.outputs import cited
from hdp_spark.jobs.preflight import (
    input_fingerprint,
    load,
    open_job_ledger,
    preflight,
    resolve,
    typed,
)
from hdp_spark.jobs.release_run import capped_table, definition
from hdp_spark.jobs.spec import EngineName, JobSpec
from hdp_spark.jobs.validation import validate_into
from hdp_spark.ledger import open_ledger

__all__ = ["JobCheck", "ReleasePlan", "check_job", "committed_releases", "plan_job"]


@dataclass(frozen=True, slots=True)
class ReleasePlan:
    """What :func:`~hdp_spark.jobs.runner.run_job` would do with one release (from
    :func:`plan_job`).

    Attributes:
        release_id: the release.
        committed: True if it is committed already (a run would re-publish it).
        rows_in_release: rows whose key is in the public key set.
        users_over_budget: users in the release whose remaining budget is below its demand
            (capped, excluded or refused according to ``[budget] policy``).
    """

    release_id: str
    committed: bool
    rows_in_release: int
    users_over_budget: int


@dataclass(frozen=True, slots=True)
class JobCheck:
    """Result of :func:`check_job`: for the trusted operator, never published.

    Attributes:
        quality: data-quality counts (schema rule violations, user-id and budget checks).
        plans: the budget situation of each release.
    """

    quality: Mapping[str, Any]
    plans: tuple[ReleasePlan, ...]


def _ledger_if_any(spec: JobSpec) -> Any:
    """The job's ledger, opened without creating it; None when there is none yet and no
    output cites one (a missing ledger that outputs cite is refused, as by a run)."""
    ledger_ids, commit_ids = cited(spec.output.path)
    if ledger_ids or commit_ids or spec.ledger.path.exists():
        return open_job_ledger(spec)
    return None


def _committed(spec: JobSpec, ledger: Any, fingerprint: str) -> frozenset[str]:
    """The releases whose idempotency key the ledger holds (as the runner looks them up)."""
    return frozenset(
        rel.id for rel in spec.releases
        if ledger.find(idempotency_key(spec.name, rel.id, fingerprint, definition(rel)))
        is not None
    )


def committed_releases(
    job: JobSpec | str | Path, *, engine: EngineName | None = None, spark: Any = None
) -> frozenset[str]:
    """The releases of ``job`` committed already on its ledger for its current input: a run
    re-publishes them and charges nothing for them.

    Reads the input files (their keyed fingerprint; a table input is loaded) and the
    ledger, without locking or writing it; an absent ledger means nothing is committed.

    Privacy:
        The answer depends on the input through its fingerprint, keyed by the ledger's
        secret: for the operator (like ``check``), a fact about this run, never published.
    """
    spec = typed(resolve(job, engine))
    if not spec.ledger.path.exists():
        return frozenset()
    spec.check_ledger_path()
    ledger = open_ledger(spec.ledger_backend, spec.ledger.path,
                         lock_timeout=spec.ledger.lock_timeout,
                         compact_every=spec.ledger.compact_every, create=False)
    adapter = make_adapter(spec.engine, spark, spec.spark_conf)
    if spec.input.path is None:
        df, before = load(adapter, spec)
    else:
        df, before = None, file_stats(spec.input.path)
    return _committed(spec, ledger, input_fingerprint(adapter, spec, df, before, ledger))


def plan_job(
    job: JobSpec | str | Path, *, engine: EngineName | None = None, spark: Any = None
) -> list[ReleasePlan]:
    """Dry run: validate the input and report the budget situation of each release.

    Reads the ledger without locking it; computes nothing private (no noise, no charge).
    Later releases of the same run are not accounted for: each plan assumes the ledger as
    it is now. :func:`check_job` also returns the data-quality counts.

    Privacy:
        Only counts derived from the ε vectors and budgets (public in this model).
    """
    return list(check_job(job, engine=engine, spark=spark).plans)


def check_job(
    job: JobSpec | str | Path, *, engine: EngineName | None = None, spark: Any = None
) -> JobCheck:
    """Dry run for the operator: data-quality counts and each release's budget situation.

    Writes nothing: no data-quality report (a run writes it, beside the ledger), no
    ledger (a job without one yet is checked against an empty ledger); computes nothing
    private otherwise (no noise, no charge).

    Privacy:
        The quality counts (nulls, out-of-bounds values per rule) are functions of private
        data: they are for the trusted operator (this result, the ``check`` command's
        output), never for publication. The plans hold only counts derived from the ε
        vectors and budgets (public in this model).
    """
    spec = preflight(resolve(job, engine), spark)
    adapter = make_adapter(spec.engine, spark, spec.spark_conf)
    df, before = load(adapter, spec)
    quality: dict[str, Any] = {"schema": None}
    validate_into(adapter, df, spec, quality)
    ledger = _ledger_if_any(spec)
    if ledger is None:
        spent, found = adapter.io.from_pairs([], []), frozenset[str]()
    else:
        spent = ledger.spent(adapter.io)
        found = _committed(spec, ledger, input_fingerprint(adapter, spec, df, before, ledger))
    prepared = adapter.prepare(df, spec.input.user_id, spec.budget, spent)
    plans = []
    for rel in spec.releases:
        capped = capped_table(adapter, prepared, rel, "fail")
        n = adapter.count(capped)
        plans.append(ReleasePlan(rel.id, rel.id in found, n, adapter.count_over(capped)))
    return JobCheck(quality, tuple(plans))
