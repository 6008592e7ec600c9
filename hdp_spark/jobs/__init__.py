"""Scheduled release jobs with a persistent per-user privacy ledger.

Run a job with ``python -m hdp_spark.jobs run jobs/<job>.toml`` (or ``hdp-release run ...``),
or from Python with :func:`run_job`. The job format, the ledger and the guarantees are
described in ``docs/jobs.md``.
"""

from __future__ import annotations

from hdp_spark.jobs.dry_run import (
    JobCheck,
    ReleasePlan,
    check_job,
    committed_releases,
    plan_job,
)
from hdp_spark.jobs.kind import AggregatorKind, Interval, KindResult
from hdp_spark.jobs.planning import JobBudgetPlan, plan_budget
from hdp_spark.jobs.registry import get_kind, kinds, register_kind
from hdp_spark.jobs.results import AllocationSummary, JobRun, ReleaseRun
from hdp_spark.jobs.runner import quality_dir, run_job
from hdp_spark.jobs.spec import (
    AggregatorEntry,
    BudgetSpec,
    InputSpec,
    JobSpec,
    LedgerSpec,
    OutputSpec,
    ReleaseSpec,
    load_job,
    parse_job,
)

__all__ = [
    "AggregatorEntry",
    "AggregatorKind",
    "AllocationSummary",
    "BudgetSpec",
    "InputSpec",
    "Interval",
    "JobBudgetPlan",
    "JobCheck",
    "JobRun",
    "JobSpec",
    "KindResult",
    "LedgerSpec",
    "OutputSpec",
    "ReleasePlan",
    "ReleaseRun",
    "ReleaseSpec",
    "check_job",
    "committed_releases",
    "get_kind",
    "kinds",
    "load_job",
    "parse_job",
    "plan_budget",
    "plan_job",
    "quality_dir",
    "register_kind",
    "run_job",
]
