"""What a run of a job returns: per release, the whole run, and its budget allocation.

Plain records below both the runner (which makes them) and the report (which reads them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hdp_spark.errors import JobError
from hdp_spark.jobs.adapter import BudgetDistribution
from hdp_spark.jobs.spec import JobSpec
from hdp_spark.ledger.base import CommitRecord

__all__ = ["AllocationSummary", "JobRun", "ReleaseRun"]


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
