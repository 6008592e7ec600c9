"""What the job runner asks of an engine, and the small summaries engines hand back.

Each engine implements :class:`EngineAdapter` with native operations only (vectorized numpy
on pandas; column expressions, joins and aggregates on Spark: no per-row Python). Both apply
the rules of :mod:`hdp_spark.core.ledger` identically; the tests compare them. The adapter
also hands out the core :class:`~hdp_spark.core.pipeline.Engine` of a table, through which
every kind runs its release (:mod:`hdp_spark.jobs.kinds_central`,
:mod:`hdp_spark.jobs.kinds_partial`): the jobs run on the same pipeline as ``agg``.

Columns the runner adds to the input table (removed from nothing the user reads):
``__uid`` (user id as a string), ``__remaining`` (remaining budget in ledger units),
``__status`` (capping status of the current release) and, with a budget allocation,
``__start`` (remaining budget when the run started: the base of the releases' shares).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from hdp_spark.core.ledger import BudgetPolicy, ChargeMode
from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.validation import ValidationReport
from hdp_spark.jobs.kind import ReleaseAdapter
from hdp_spark.jobs.spec import BudgetSpec, InputSpec
from hdp_spark.ledger.base import FrameIO

__all__ = [
    "QUANTILES",
    "START",
    "AggCharge",
    "BudgetDistribution",
    "ChargeSummary",
    "EngineAdapter",
    "Frame",
    "InputCheck",
]

Frame = Any
"""An engine's native table (a pandas or a Spark DataFrame): the adapter's own type."""

UID, REMAINING, STATUS, START = "__uid", "__remaining", "__status", "__start"
QUANTILES: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
HIST_BINS = 20

Key = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class InputCheck:
    """Data-quality counts of the input (for the operator; never published).

    Attributes:
        rows: number of rows.
        null_users: rows whose user id is null.
        duplicate_users: rows whose user id already appeared on another row.
        invalid_budgets: rows without a valid total budget (see ``[budget]``).
        inconsistent_budgets: users whose ``[budget] column`` differs between their rows
            (counted only when user ids repeat).
    """

    rows: int
    null_users: int
    duplicate_users: int
    invalid_budgets: int
    inconsistent_budgets: int = 0


@dataclass(frozen=True, slots=True)
class AggCharge:
    """One aggregator's charging inputs: its ε column, ε grid and effective ε per cell.

    ``per_user``: a user-level aggregator (the protected unit is a user with all their
    rows): each user is charged the largest charge of their rows ONCE, not their sum.
    """

    eps_column: str
    grid: EpsGrid | None
    effective: Mapping[tuple[Key, float], float]
    per_user: bool = False


@dataclass(frozen=True, slots=True)
class ChargeSummary:
    """Budget consumed by one release.

    Attributes:
        rows_in_release: rows whose key is in the public key set.
        users_charged: users with a positive charge.
        units_charged: total units charged.
        units_max: largest charge of one user.
        users_capped: users in the release whose ε was capped to their remaining budget.
        users_excluded: users in the release excluded (ε := 0) for lack of budget.
        overspent: users whose charge exceeds their remaining budget (must be 0).
    """

    rows_in_release: int
    users_charged: int
    units_charged: int
    units_max: int
    users_capped: int
    users_excluded: int
    overspent: int


@dataclass(frozen=True, slots=True)
class BudgetDistribution:
    """Distribution of the users' budgets after a run (ε units converted to ε).

    Attributes:
        users: users in the input table.
        exhausted: users with no budget left.
        remaining_quantiles: quantile -> remaining ε (linear interpolation).
        spent_quantiles: quantile -> spent ε.
        total_spent: ε spent by all users together.
        hist_edges: bin edges of the remaining-budget histogram.
        hist_counts: users per bin.
    """

    users: int
    exhausted: int
    remaining_quantiles: Mapping[float, float]
    spent_quantiles: Mapping[float, float]
    total_spent: float
    hist_edges: Sequence[float] = field(default_factory=tuple)
    hist_counts: Sequence[int] = field(default_factory=tuple)


class EngineAdapter(ReleaseAdapter, Protocol):
    """Native operations of one engine for the job runner.

    ``Frame`` is the engine's table type; the runner never looks inside one, it only hands
    frames back to the adapter that made them.
    """

    name: str

    @property
    def io(self) -> FrameIO:
        """The ledger's bridge to this engine's frames."""

    def engine(self, df: Frame) -> Engine:
        """The core pipeline's engine over ``df`` (what every kind releases through)."""

    def count(self, df: Frame) -> int:
        """Number of rows of ``df`` (public: n is public in this model)."""

    def to_records(self, table: Frame) -> list[dict[str, Any]]:
        """The rows of a released (small, materialized) table as dicts of plain Python
        values (:func:`hdp_spark.jobs.values.plain`)."""

    def load(self, spec: InputSpec) -> Frame:
        """Read the input table and apply ``[input.types]`` casts."""

    def content_hash(self, df: Frame) -> str:
        """An order-independent, unkeyed hash of the table's content (table inputs).

        HMAC input only: the runner keys it with the ledger's secret before any use.
        """

    def validate(self, df: Frame, schema: TableSchema) -> ValidationReport:
        """Schema validation report (``hdp_spark.<engine>.validate``)."""

    def validate_input(
        self, df: Frame, schema: TableSchema, user_col: str, budget: BudgetSpec
    ) -> tuple[ValidationReport, Callable[[], InputCheck]]:
        """:meth:`validate`, and a function returning :meth:`check_input`'s counts: on
        Spark both come from one aggregate query; the function raises what
        :meth:`check_input` raises, so a caller checks the report first."""

    def check_input(self, df: Frame, user_col: str, budget: BudgetSpec) -> InputCheck:
        """Counts of null/duplicate user ids and invalid budgets (one pass), and of users
        whose budget column varies between their rows."""

    def prepare(self, df: Frame, user_col: str, budget: BudgetSpec, spent: Frame) -> Frame:
        """Add ``__uid`` and ``__remaining`` (budget minus ``spent``, in units, >= 0)."""

    def restrict(self, df: Frame, by: tuple[str, ...], keys: tuple[Key, ...] | None) -> Frame:
        """Only the rows whose key is in the public key set."""

    def cap(
        self, df: Frame, columns: Sequence[tuple[str, int]], policy: BudgetPolicy
    ) -> Frame:
        """Apply the capping rule to the ε columns (replaced) and add ``__status``."""

    def count_over(self, df: Frame) -> int:
        """Rows whose ``__status`` is not full (after :meth:`cap`)."""

    def count_public(self, df: Frame, columns: Sequence[str]) -> int:
        """Rows whose ε is +∞ (public rows) in any of ``columns`` (before :meth:`cap`)."""

    def charges(
        self, df: Frame, by: tuple[str, ...], aggs: Sequence[AggCharge], mode: ChargeMode
    ) -> tuple[Frame, ChargeSummary]:
        """Per-user charges (a ledger frame, units > 0) and their summary."""

    def distribution(self, df: Frame, budget_default: float | None = None) -> BudgetDistribution:
        """Remaining and spent budgets of the users of a :meth:`prepare`-d table."""

    def with_constant(self, df: Frame, column: str, value: float) -> Frame:
        """``df`` with a double column holding ``value`` on every row."""

    def only_full(self, df: Frame) -> Frame:
        """The rows whose ``__status`` is full (after :meth:`cap`)."""

    def keep_start(self, prepared: Frame) -> Frame:
        """The input of a :meth:`prepare`-d table with ``__start`` := ``__remaining`` (the
        other helper columns dropped)."""

    def limit_remaining(self, prepared: Frame, share: float) -> Frame:
        """``__remaining`` := ``min(__remaining, floor(__start · share))`` (IEEE doubles,
        as :func:`hdp_spark.jobs.allocation.simulate`)."""

    def columns_frame(self, df: Frame, columns: Sequence[str]) -> pd.DataFrame:
        """``columns`` of ``df`` as a pandas frame (public columns only: the plan's input)."""

    def public_frame(self, prepared: Frame, columns: Sequence[str]) -> pd.DataFrame:
        """``columns`` and ``__remaining`` of a :meth:`prepare`-d table as a pandas frame."""

    def clip_eps(self, df: Frame, column: str, upper: float) -> Frame:
        """``df`` with the ε ``column`` lowered to ``upper`` where above it (null, NaN and
        negative ε untouched: the release rejects them)."""

    def person_eps(self, df: Frame, column: str) -> Frame:
        """``df`` with the ε ``column`` of every row replaced by its user's smallest safe ε
        (null, NaN and negative count as 0): the ε a release under a privacy unit spends
        for the person (:mod:`hdp_spark.core.privacy_unit.spec`), so that the budget rule
        and the charges see exactly that ε."""

    def level_counts(
        self, df: Frame, column: str, grid: EpsGrid | None
    ) -> list[tuple[float, int]]:
        """``(ε level, rows)`` of the table, sorted by level (the public ε histogram)."""

    def pin(self, df: Frame) -> Frame:
        """``df``, computed at most once until :meth:`unpin` however many queries read it
        (Spark: checkpointed lazily on the executors; pandas: ``df`` itself). The release
        pins its budget table and its per-user charges."""

    def unpin(self) -> None:
        """Release every frame :meth:`pin` kept (end of a release)."""

    def release_input(self, df: Frame, extra: Sequence[str] = ()) -> Frame:
        """The table handed to the aggregators (the runner's helper columns and ``extra``
        dropped)."""
