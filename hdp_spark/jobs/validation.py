"""Validation of a job's input before any release: schema, user ids, budgets, expectations.

The counts go to a data-quality report beside the ledger (:func:`quality_dir`), for the
trusted operator only: never to outputs or to log lines above DEBUG. Only public rules
(ε, user ids, row count, budgets) stop a run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import logging
import os
from pathlib import Path
from typing import Any

from hdp_spark.errors import JobError, StorageError
from hdp_spark.jobs.adapter import EngineAdapter
from hdp_spark.jobs.outputs import output_error
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.spec import JobSpec
from hdp_spark.ledger._fs import atomic_write

__all__ = ["quality_dir", "rows_are_private", "validate", "validate_into"]

log = logging.getLogger("hdp_spark.jobs")


def quality_dir(job: JobSpec) -> Path:
    """Where the data-quality reports of a job go: ``quality/`` beside the ledger.

    ``<dir>/quality`` for a ledger at ``<dir>/ledger.sqlite`` or ``<dir>/ledger/`` (a
    parquet ledger): beside it, so that a run stopped by validation writes its report
    without creating the ledger. Like the ledger, it is for the trusted operator only.
    """
    return job.ledger.path.parent / "quality"


def _write_quality(job: JobSpec, quality: dict[str, Any]) -> Path | None:
    """Write the data-quality report (counts for the operator) beside the ledger.

    On a read-only directory (a ledger mounted read-only for runs that only re-publish)
    the report is skipped with one WARNING naming the directory (``check`` prints the same
    counts); any other failure (a full disk) stops the run before anything is charged.
    """
    directory = quality_dir(job)
    now = dt.datetime.now(dt.UTC)
    name = f"{job.name}-{now.strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}.json"
    doc = {"job": job.name, "checked_at": now.isoformat(), "engine": job.engine, **quality}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(directory / name, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            log.warning("data-quality report not written: `%s` is read-only or not writable "
                        "by this user (`hdp-release check` prints the same counts)", directory)
            return None
        raise output_error(
            directory, "the data-quality report beside the ledger; nothing was charged", exc,
            what="the data-quality report directory",
        ) from exc
    log.debug("data-quality report written to %s", directory / name)
    return directory / name


def validate(
    adapter: EngineAdapter, df: Any, job: JobSpec
) -> tuple[dict[str, Any], Path | None]:
    """Validate the input; write the counts to the operator's data-quality report.

    Returns:
        The data-quality counts (schema rule violations, user-id and budget checks) and the
        path of the report (written even when a rule stops the run; None when its directory
        is read-only).

    Privacy:
        Violation counts of value rules are functions of private data: they go to the
        quality report beside the ledger (and DEBUG logs), never to outputs or INFO+ logs.
        Only public rules (ε, user ids, row count, budgets) stop a run.
    """
    quality: dict[str, Any] = {"schema": None}
    try:
        validate_into(adapter, df, job, quality)
    except BaseException:
        quality["release_blocked"] = True
        # the validation error is the one to report
        with contextlib.suppress(JobError, StorageError):
            _write_quality(job, quality)
        raise
    quality["release_blocked"] = False
    return quality, _write_quality(job, quality)


def validate_into(
    adapter: EngineAdapter, df: Any, job: JobSpec, quality: dict[str, Any]
) -> None:
    """Run the validation of :func:`validate`, putting the counts into ``quality``.

    Raises:
        JobError: a public rule (user ids, budgets) is broken.
        SchemaError: the input fails a blocking rule of its schema.

    Privacy:
        The counts are for the operator's data-quality report only; only public rules
        raise.
    """
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
        # one aggregate pass for both on Spark; the report is recorded and checked first
        report, input_check = adapter.validate_input(df, load_schema(spec.schema),
                                                     spec.user_id, job.budget)
        quality["schema"] = report.to_dict()
        if not report.ok:
            # counts of private value rules: operator only (never INFO+, never outputs)
            log.debug("schema validation: rule violations (value rules never block; the "
                      "aggregators clamp or impute): %s", dict(report.violations))
        report.raise_for_release()
        check = input_check()
    else:
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
                "aggregator of the job is user-level (`user_mean`), charges nothing "
                "(`ldp_mean`), is in a release with `privacy_unit` or is a partial-DP kind "
                f"with `privacy_unit = \"{col}\"` (and `max_rows`); "
                f"{check.duplicate_users} row(s) repeat an id."
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
    if rows_are_private(job):
        # with many rows per person the row count is private: not logged at INFO
        log.info("input: user ids checked, budgets valid")
    else:
        log.info("input: %d row(s), user ids checked, budgets valid", check.rows)
    _expectations_into(adapter, df, job, quality)


def rows_are_private(job: JobSpec) -> bool:
    """Whether a person's number of rows is private in this job: a release under
    ``[releases.privacy_unit]`` or an ``ldp_mean`` reading one report per person (their
    neighbours replace all of a person's rows by any number of rows). The input's row
    count then depends on how many rows each person has, so it is kept out of INFO logs
    (the quality report, the operator's, still holds it). So is a partial-DP kind with
    ``privacy_unit`` (docs/partial_dp.md, "A person with several rows")."""
    return any(
        rel.unit is not None
        or (a.kind == "ldp_mean" and getattr(a.spec, "privacy_unit", None) is not None)
        or (get_kind(a.kind).unit == "person"
            and getattr(a.spec, "params", {}).get("privacy_unit") is not None)
        for rel in job.releases for a in rel.aggregators)


def _row_level_kinds(job: JobSpec) -> list[str]:
    """Kinds of the job that need one row per user (all but user-level and charge-free,
    and those of releases under a privacy unit, which bound each user's rows)."""
    return sorted({
        a.kind for rel in job.releases for a in rel.aggregators
        if get_kind(a.kind).unit not in ("user", "none") and rel.unit is None
        and not a.bounds_users(job.input.user_id)
    })


def _expectations_into(
    adapter: EngineAdapter, df: Any, job: JobSpec, quality: dict[str, Any]
) -> None:
    """Run the schema's great-expectations suite when the job asks for it
    (``[input] expectations = true``) and the ``quality`` extra is installed.

    Off by default: the schema's own vectorized validation (above) enforces and counts every
    rule the suite mirrors, and importing great-expectations alone costs seconds (measured:
    6.6 s of a 12 s sample job; benchmarks/RESULTS.md). Its results go to the operator's
    data-quality report only (``quality["expectations"]``); they never block a release (value
    rules are handled by the aggregators) and never reach outputs or log lines above DEBUG.
    """
    if job.input.schema is None:
        return
    if not job.input.expectations:
        quality["expectations"] = {
            "skipped": "not requested ([input] expectations = true runs the suite)"}
        return
    try:
        import great_expectations  # noqa: F401
    except ImportError:
        quality["expectations"] = {"skipped": "great_expectations is not installed"}
        log.warning("`[input] expectations = true` but great_expectations is not installed: "
                    "the suite was skipped (pip install 'hdp_spark[quality]')")
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
