"""What the job runner asks of an engine, and the small summaries engines hand back.

Each engine implements :class:`EngineAdapter` with native operations only (vectorized numpy
on pandas; column expressions, joins and aggregates on Spark: no per-row Python). Both apply
the rules of :mod:`hdp_spark.core.ledger` identically; the tests compare them.

Columns the runner adds to the input table (removed from nothing the user reads):
``__uid`` (user id as a string), ``__remaining`` (remaining budget in ledger units),
``__status`` (capping status of the current release) and, with a budget allocation,
``__start`` (remaining budget when the run started: the base of the releases' shares).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hdp_spark.core.ledger import BudgetPolicy, ChargeMode
from hdp_spark.core.levels import EpsGrid
from hdp_spark.errors import EngineUnavailableError
from hdp_spark.jobs.spec import BudgetSpec, InputSpec
from hdp_spark.ledger.base import FrameIO

__all__ = [
    "QUANTILES",
    "START",
    "AggCharge",
    "BudgetDistribution",
    "ChargeSummary",
    "EngineAdapter",
    "InputCheck",
    "check_engine",
    "make_adapter",
]

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


class EngineAdapter(Protocol):
    """Native operations of one engine for the job runner."""

    name: str
    io: FrameIO

    def load(self, spec: InputSpec) -> Any:
        """Read the input table and apply ``[input.types]`` casts."""

    def content_hash(self, df: Any) -> str:
        """An order-independent, unkeyed hash of the table's content (table inputs).

        HMAC input only: the runner keys it with the ledger's secret before any use.
        """

    def validate(self, df: Any, schema: Any) -> Any:
        """Schema validation report (``hdp_spark.<engine>.validate``)."""

    def check_input(self, df: Any, user_col: str, budget: BudgetSpec) -> InputCheck:
        """Counts of null/duplicate user ids and invalid budgets (one pass), and of users
        whose budget column varies between their rows."""

    def prepare(self, df: Any, user_col: str, budget: BudgetSpec, spent: Any) -> Any:
        """Add ``__uid`` and ``__remaining`` (budget minus ``spent``, in units, >= 0)."""

    def restrict(self, df: Any, by: tuple[str, ...], keys: tuple[Key, ...] | None) -> Any:
        """Only the rows whose key is in the public key set."""

    def cap(
        self, df: Any, columns: Sequence[tuple[str, int]], policy: BudgetPolicy
    ) -> Any:
        """Apply the capping rule to the ε columns (replaced) and add ``__status``."""

    def count_over(self, df: Any) -> int:
        """Rows whose ``__status`` is not full (after :meth:`cap`)."""

    def count_public(self, df: Any, columns: Sequence[str]) -> int:
        """Rows whose ε is +∞ (public rows) in any of ``columns`` (before :meth:`cap`)."""

    def charges(
        self, df: Any, by: tuple[str, ...], aggs: Sequence[AggCharge], mode: ChargeMode
    ) -> tuple[Any, ChargeSummary]:
        """Per-user charges (a ledger frame, units > 0) and their summary."""

    def distribution(self, df: Any, budget_default: float | None = None) -> BudgetDistribution:
        """Remaining and spent budgets of the users of a :meth:`prepare`-d table."""

    def with_constant(self, df: Any, column: str, value: float) -> Any:
        """``df`` with a double column holding ``value`` on every row."""

    def only_full(self, df: Any) -> Any:
        """The rows whose ``__status`` is full (after :meth:`cap`)."""

    def keep_start(self, prepared: Any) -> Any:
        """The input of a :meth:`prepare`-d table with ``__start`` := ``__remaining`` (the
        other helper columns dropped)."""

    def limit_remaining(self, prepared: Any, share: float) -> Any:
        """``__remaining`` := ``min(__remaining, floor(__start · share))`` (IEEE doubles,
        as :func:`hdp_spark.jobs.allocation.simulate`)."""

    def public_frame(self, prepared: Any, columns: Sequence[str]) -> Any:
        """``columns`` and ``__remaining`` of a :meth:`prepare`-d table as a pandas frame."""

    def clip_eps(self, df: Any, column: str, upper: float) -> Any:
        """``df`` with the ε ``column`` lowered to ``upper`` where above it (null, NaN and
        negative ε untouched: the release rejects them)."""

    def level_counts(
        self, df: Any, column: str, grid: EpsGrid | None
    ) -> list[tuple[float, int]]:
        """``(ε level, rows)`` of the table, sorted by level (the public ε histogram)."""

    def release_input(self, df: Any, extra: Sequence[str] = ()) -> Any:
        """The table handed to the aggregators (the runner's helper columns and ``extra``
        dropped)."""


def java_executable(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``java`` a local Spark would launch, or None.

    Same rule as Spark's launcher (``bin/spark-class``): ``$JAVA_HOME/bin/java`` when
    ``JAVA_HOME`` is set, otherwise ``java`` on ``PATH``.
    """
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        return java if os.path.isfile(java) and os.access(java, os.X_OK) else None
    return shutil.which("java", path=env.get("PATH", os.defpath))


def check_engine(
    engine: str, spark: Any = None, conf: Sequence[tuple[str, str]] = ()
) -> None:
    """Raise if ``engine`` cannot start here; reads and writes nothing.

    For Spark without a given or active session: pyspark must be importable and, unless
    the session is a remote Spark Connect one (``spark.remote`` = ``sc://...``), Java must
    be found the way Spark's launcher finds it (:func:`java_executable`).

    Raises:
        EngineUnavailableError: naming what is missing and how to provide it.
    """
    if engine != "spark" or spark is not None:
        return
    try:
        from hdp_spark.spark.job_adapter import active_session

        active = active_session()
    except ImportError as exc:
        msg = ("the Spark engine needs pyspark, which is not installed: pip install "
               "'pyspark[connect]' (or run with --engine pandas).")
        raise EngineUnavailableError(msg) from exc
    if active:
        return
    remote = dict(conf).get("spark.remote") or os.environ.get("SPARK_REMOTE") or ""
    if remote.startswith("sc://"):
        return
    if java_executable() is not None:
        return
    home = os.environ.get("JAVA_HOME")
    if home:
        msg = (f"the Spark engine needs Java 17, but JAVA_HOME = {home!r} has no executable "
               "bin/java: point JAVA_HOME at a JDK 17 (or run with --engine pandas).")
    else:
        msg = ("the Spark engine needs Java 17, but JAVA_HOME is not set and no `java` is on "
               "PATH: install a JDK 17 and set JAVA_HOME or put `java` on PATH (or run with "
               "--engine pandas).")
    raise EngineUnavailableError(msg)


def make_adapter(engine: str, spark: Any = None, conf: Sequence[tuple[str, str]] = ()) -> Any:
    """The adapter of ``engine`` (``"pandas"`` or ``"spark"``).

    Args:
        engine: engine name.
        spark: an existing SparkSession (Spark only); otherwise the active one, or a new one
            configured with ``conf``.
        conf: Spark settings used when a session must be created.
    """
    if engine == "pandas":
        from hdp_spark.jobs._pandas import PandasAdapter

        return PandasAdapter()
    from hdp_spark.spark.job_adapter import SparkAdapter

    return SparkAdapter(spark, conf)
