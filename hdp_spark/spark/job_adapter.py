"""Spark implementation of :class:`~hdp_spark.jobs.adapter.EngineAdapter`.

Native column expressions, joins and aggregates only (no UDF, no RDD). The ledger's spend is
joined with the table on the executors; only per-release summaries and the small
(group, ε level) effective-ε tables cross the driver.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.ledger import (
    BUDGET_MAX,
    CAPPED,
    DEMAND_CLAMP,
    EXCLUDED,
    FULL,
    UNIT,
    UNIT_BITS,
    BudgetPolicy,
    ChargeMode,
)
from hdp_spark.core.levels import EpsGrid
from hdp_spark.errors import SchemaError
from hdp_spark.jobs.adapter import (
    HIST_BINS,
    QUANTILES,
    REMAINING,
    START,
    STATUS,
    UID,
    AggCharge,
    BudgetDistribution,
    ChargeSummary,
    InputCheck,
    Key,
)
from hdp_spark.jobs.spec import BudgetSpec, InputSpec
from hdp_spark.jobs.values import plain
from hdp_spark.ledger.base import UNITS_COLUMN, USER_COLUMN
from hdp_spark.spark.engine import SparkEngine
from hdp_spark.spark.expressions import with_level
from hdp_spark.spark.ledger_io import SparkIO

__all__ = ["SparkAdapter", "active_session"]

SPENT = "__spent"
BUDGET = "__budget"
_SCALE = float(2**UNIT_BITS)
_INF = float("inf")


def active_session() -> bool:
    """Whether a Spark session is active in this process (pyspark imported lazily, so a
    missing pyspark is an ImportError here)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def _session(spark: Any, conf: Sequence[tuple[str, str]]) -> Any:
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Spark's progress bars (`[Stage 3:==>  (1 + 1) / 2]`) would bury the job's log lines;
    # a job's `[spark]` table may turn them back on.
    builder = SparkSession.builder.appName("hdp_spark-jobs").config(
        "spark.ui.showConsoleProgress", "false")
    for k, v in conf:
        builder = builder.config(k, v)
    # a local session starts with the class-data-sharing archive of Spark's classes, when
    # the install step trained one (the sample job: session start and first query faster)
    from hdp_spark.spark.extension import start_archive

    return start_archive(builder).getOrCreate()


# Java's Double.parseDouble (behind Spark's string -> double cast) accepts a trailing
# d/D/f/F ("1d"); pandas does not. Such cells are null on both engines.
_JAVA_SUFFIX = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]\s*$"
_LONG_LIMIT = 2.0**63


def _cast(df: DataFrame, column: str, kind: str) -> Column:
    """Cast one column on load; whatever does not parse becomes null, also under ANSI mode
    (native ``try_cast``, no UDF). The pandas twin is ``hdp_spark.jobs._pandas._cast``."""
    source = df.schema[column].dataType
    c = F.col(column)
    if kind == "string":
        return c if isinstance(source, T.StringType) else c.cast("string")
    if kind == "boolean":
        if isinstance(source, T.BooleanType):
            return c
        if isinstance(source, T.NumericType):
            x = c.cast("double")
            return F.when(~F.isnan(x), x != F.lit(0.0))
        return c.cast("string").try_cast("boolean")
    if kind == "long" and isinstance(source, T.IntegralType):
        return c.cast("long")
    if isinstance(source, T.BooleanType | T.NumericType):
        x = c.cast("double")
    else:
        text = c.cast("string")
        x = F.when(~text.rlike(_JAVA_SUFFIX), text.try_cast("double"))
    if kind == "double":
        return x
    whole = ~F.isnan(x) & (F.abs(x) < F.lit(_LONG_LIMIT)) & (x == F.round(x, 0))
    return F.when(whole, x).try_cast("long")


def _has(df: DataFrame, column: str, role: str) -> None:
    if column not in df.columns:
        msg = f"{role} column `{column}` is not in the table."
        raise SchemaError(msg)


def ceil_units_expr(col: Column) -> Column:
    """Spark twin of :func:`~hdp_spark.core.ledger.ceil_units_numpy`."""
    x = col.cast("double")
    x = F.when(x.isNull() | F.isnan(x) | (x < F.lit(0.0)), F.lit(0.0)).otherwise(
        F.least(x, F.lit(DEMAND_CLAMP))
    )
    return F.ceil(x * F.lit(_SCALE)).cast("long")


def budget_units_expr(budget: BudgetSpec) -> tuple[Column, Column]:
    """Spark twin of :func:`~hdp_spark.core.ledger.budget_units_numpy`: (units, invalid)."""
    if budget.column is None:
        default = float(budget.default or 0.0)
        return F.floor(F.lit(default) * F.lit(_SCALE)).cast("long"), F.lit(False)
    b = F.col(budget.column).cast("double")
    if budget.default is not None:
        b = F.coalesce(b, F.lit(float(budget.default)))
    bad = b.isNull() | F.isnan(b) | (b < F.lit(0.0)) | (b == F.lit(_INF)) | (
        b > F.lit(BUDGET_MAX)
    )
    units = F.when(bad, F.lit(0)).otherwise(F.floor(b * F.lit(_SCALE))).cast("long")
    return units, bad


class SparkAdapter:
    """The job runner's operations on Spark DataFrames."""

    name = "spark"

    def __init__(self, spark: Any = None, conf: Sequence[tuple[str, str]] = ()) -> None:
        self.spark = _session(spark, conf)
        self.io = SparkIO(self.spark)
        self._pinned: list[DataFrame] = []

    def pin(self, df: DataFrame) -> DataFrame:
        """``df`` checkpointed lazily on the executors (``localCheckpoint(eager=False)``,
        as :meth:`load` pins the input): the first query that reads it computes it (its
        joins, its shuffles, coalesced by AQE), the later ones read its blocks.

        Not ``persist``: a cached plan keeps Spark's 200 shuffle partitions (AQE does not
        coalesce a cached plan by default), which doubled the JVM's CPU time on the sample
        job. Deterministic either way (the input is checkpointed, ledger files are
        immutable).
        """
        pinned: DataFrame = df.localCheckpoint(eager=False)
        self._pinned.append(pinned)
        return pinned

    def unpin(self) -> None:
        """Drop the references to the pinned frames (their blocks are freed with them)."""
        self._pinned.clear()

    def engine(self, df: DataFrame) -> SparkEngine:
        """The core pipeline's engine over ``df``."""
        return SparkEngine(df)

    def count(self, df: DataFrame) -> int:
        """Rows of ``df`` (one Spark job)."""
        return int(df.count())

    def to_records(self, table: DataFrame) -> list[dict[str, Any]]:
        """The rows of a released (small) table, collected to the driver."""
        return [{str(k): plain(v) for k, v in r.asDict(recursive=True).items()}
                for r in table.collect()]

    def load(self, spec: InputSpec) -> DataFrame:
        """Read the input (CSV, parquet or a table), cast the schema's columns and
        ``[input.types]``, checkpoint it.

        The checkpoint pins the rows read once: the fingerprint, the release and the charges
        all see the same data even if the source changes during the run.

        Privacy:
            A value cell that does not parse as its column's type becomes null (imputed by
            the aggregators), so whether the read succeeds never depends on a private value.
        """
        reader = self.spark.read
        if spec.table is not None:
            df = self.spark.table(spec.table)
        elif spec.resolved_format == "csv":
            df = reader.csv(str(spec.path), header=True, inferSchema=True)
        else:
            df = reader.parquet(str(spec.path))
        explicit = {c for c, _ in spec.types}
        casts = {}
        for col, kind in spec.casts:
            if col not in explicit and col not in df.columns:
                continue  # a declared column that is missing: schema validation names it
            _has(df, col, "typed")
            casts[col] = _cast(df, col, kind)
        if casts:
            df = df.withColumns(casts)
        pinned: DataFrame = df.localCheckpoint(eager=True)
        return pinned

    def content_hash(self, df: DataFrame) -> str:
        """Order-independent hash of the rows (count, sum and xor of 64-bit row hashes).

        Unkeyed: HMAC input only (the runner keys it with the ledger's secret on the
        driver); never store, log or publish it. The secret is deliberately not fed into
        the Spark plan (plans and their literals show up in the Spark UI and event logs);
        the aggregate row only travels from the executors to the driver's memory.
        """
        cols = [F.col(c) for c in df.columns]
        h = F.xxhash64(*cols)  # design-ok: aggregated, then HMAC input only
        row = df.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(h.cast("decimal(38,0)")).alias("s"),
            F.bit_xor(F.xxhash64(F.lit("hdp"), *cols)).alias("x"),  # design-ok: HMAC input
        ).collect()[0]
        payload = f"{row['n']}:{row['s']}:{row['x']}:{df.columns}".encode()
        return hashlib.sha256(payload).hexdigest()  # design-ok: HMAC input only

    def validate(self, df: DataFrame, schema: Any) -> Any:
        """``hdp_spark.spark.validate(df, schema)`` (issue 5)."""
        import hdp_spark.spark as hs

        return hs.validate(df, schema)

    def check_input(self, df: DataFrame, user_col: str, budget: BudgetSpec) -> InputCheck:
        """Null/duplicate user ids and invalid budgets, as counts (one Spark job; a second
        one for varying budgets only when user ids repeat)."""
        exprs, finish = self._input_query(df, user_col, budget)
        return finish(df.agg(*exprs).collect()[0])

    def validate_input(
        self, df: DataFrame, schema: Any, user_col: str, budget: BudgetSpec
    ) -> tuple[Any, Callable[[], InputCheck]]:
        """:meth:`validate` and :meth:`check_input` in ONE aggregate query (one Spark job
        instead of two): the report, and a function returning the input check (computed
        already). A missing user id or budget column falls back to the two calls, the
        second one run only when the function is called (errors in the same order)."""
        if user_col not in df.columns or (
            budget.column is not None and budget.column not in df.columns
        ):
            return self.validate(df, schema), lambda: self.check_input(df, user_col, budget)
        from hdp_spark.spark.schema import validation_query

        rules, report_of = validation_query(df, schema)
        checks, check_of = self._input_query(df, user_col, budget)
        row = df.agg(*rules, *checks).collect()[0]
        return report_of(row), lambda: check_of(row)

    def _input_query(
        self, df: DataFrame, user_col: str, budget: BudgetSpec
    ) -> tuple[list[Column], Callable[[Any], InputCheck]]:
        """The aggregates of :meth:`check_input` and the function reading its counts from
        the result row (it may run the varying-budget query)."""
        _has(df, user_col, "user id")
        if budget.column is not None:
            _has(df, budget.column, "budget")
        _units, bad = budget_units_expr(budget)
        uid = F.col(user_col).cast("string")
        exprs = [
            F.count(F.lit(1)).alias("__in_n"),
            F.count(uid).alias("__in_ids"),
            F.countDistinct(uid).alias("__in_distinct"),
            F.sum(F.when(bad, 1).otherwise(0)).alias("__in_bad"),
        ]

        def finish(row: Any) -> InputCheck:
            n = int(row["__in_n"])
            dups = int(row["__in_ids"]) - int(row["__in_distinct"])
            inconsistent = 0
            if dups and budget.column is not None:
                b = F.col(budget.column).cast("double")
                per = df.where(uid.isNotNull()).groupBy(uid.alias("__u")).agg(
                    F.countDistinct(b).alias("d"), F.max(b.isNull().cast("int")).alias("z"),
                    F.min(b.isNull().cast("int")).alias("a"),
                )
                inconsistent = int(per.where(
                    (F.col("d") > 1) | ((F.col("z") == 1) & (F.col("a") == 0))
                ).count())
            return InputCheck(
                rows=n,
                null_users=n - int(row["__in_ids"]),
                duplicate_users=dups,
                invalid_budgets=int(row["__in_bad"] or 0),
                inconsistent_budgets=inconsistent,
            )

        return exprs, finish

    def prepare(self, df: DataFrame, user_col: str, budget: BudgetSpec, spent: Any) -> DataFrame:
        """Join the spend and add ``__uid`` and ``__remaining`` (units, >= 0)."""
        units, _bad = budget_units_expr(budget)
        s = spent.select(F.col(USER_COLUMN).alias(UID), F.col(UNITS_COLUMN).alias(SPENT))
        out = (
            df.withColumn(UID, F.col(user_col).cast("string"))
            .join(s, on=UID, how="left")
            .withColumn(SPENT, F.coalesce(F.col(SPENT), F.lit(0).cast("long")))
            .withColumn(BUDGET, units)
        )
        return out.withColumn(
            REMAINING, F.greatest(F.col(BUDGET) - F.col(SPENT), F.lit(0).cast("long"))
        )

    def restrict(
        self, df: DataFrame, by: tuple[str, ...], keys: tuple[Key, ...] | None
    ) -> DataFrame:
        """Rows whose group key is in ``keys`` (broadcast semi-join)."""
        if keys is None:
            return df
        fields = []
        for c in by:
            _has(df, c, "group")
            fields.append(T.StructField(c, df.schema[c].dataType, False))
        key_df = self.spark.createDataFrame([list(k) for k in keys], T.StructType(fields))
        return df.join(F.broadcast(key_df), on=list(by), how="left_semi")

    def cap(
        self, df: DataFrame, columns: Sequence[tuple[str, int]], policy: BudgetPolicy
    ) -> DataFrame:
        """Capped ε columns (replacing the originals) and ``__status``.

        No columns (a release of charge-free kinds only): every row is full.
        """
        if not columns:
            return df.withColumn(STATUS, F.lit(FULL).cast("byte"))
        k = sum(m for _, m in columns)
        demand: Column = F.lit(0).cast("long")
        valid_all: Column = F.lit(True)
        for c, m in columns:
            _has(df, c, "ε")
            e = F.col(c).cast("double")
            demand = demand + F.lit(m) * ceil_units_expr(e)
            valid_all = valid_all & e.isNotNull() & ~F.isnan(e) & (e >= F.lit(0.0))
        over = (demand > F.col(REMAINING)) & valid_all
        share = F.expr(f"`{REMAINING}` div {k}").cast("double") * F.lit(UNIT)
        out = df.withColumn("__over", over)
        for c, _ in columns:
            e = F.col(c).cast("double")
            if policy == "cap":
                new = F.when(F.col("__over"), F.least(e, share)).otherwise(e)
            elif policy == "exclude":
                new = F.when(F.col("__over"), F.lit(0.0)).otherwise(e)
            else:
                new = e
            out = out.withColumn(c, new)
        code = EXCLUDED if policy == "exclude" else CAPPED
        out = out.withColumn(
            STATUS, F.when(F.col("__over"), F.lit(code)).otherwise(F.lit(FULL)).cast("byte")
        )
        return out.drop("__over")

    def count_over(self, df: DataFrame) -> int:
        """Rows whose ε had to be capped or excluded."""
        return int(df.where(F.col(STATUS) != F.lit(FULL)).count())

    def count_public(self, df: DataFrame, columns: Sequence[str]) -> int:
        """Rows whose ε is +∞ (public rows) in any of ``columns`` (before :meth:`cap`)."""
        if not columns:
            return 0
        inf = F.lit(_INF).cast("double")
        public = [F.col(c).cast("double") == inf for c in columns]
        cond = public[0]
        for c in public[1:]:
            cond = cond | c
        return int(df.where(cond).count())

    def charges(
        self,
        df: DataFrame,
        by: tuple[str, ...],
        aggs: Sequence[AggCharge],
        mode: ChargeMode = "effective",
    ) -> tuple[DataFrame, ChargeSummary]:
        """Per-user charges of one release (broadcast joins with the effective-ε tables)."""
        total: Column = F.lit(0).cast("long")
        matched: Column = F.lit(False)
        user_level: list[str] = []  # per-row charges of user-level aggregators
        out = df
        for j, agg in enumerate(aggs):
            lv, eff = f"__lv{j}", f"__eff{j}"
            fields = [T.StructField(c, df.schema[c].dataType, True) for c in by]
            fields += [T.StructField(lv, T.DoubleType(), False),
                       T.StructField(eff, T.DoubleType(), False)]
            cells = [[*key, float(level), float(e)] for (key, level), e in agg.effective.items()]
            table = self.spark.createDataFrame(cells, T.StructType(fields))
            out = with_level(out, agg.eps_column, agg.grid, lv).join(
                F.broadcast(table), on=[*by, lv], how="left"
            )
            demand = ceil_units_expr(F.col(agg.eps_column))
            charge = demand if mode == "demand" else F.least(ceil_units_expr(F.col(eff)), demand)
            one = F.when(F.col(eff).isNull(), F.lit(0).cast("long")).otherwise(charge)
            if agg.per_user:
                user_level.append(f"__u{j}")
                out = out.withColumn(f"__u{j}", one)
            else:
                total = total + one
            matched = matched | F.col(eff).isNotNull()
        per_row = out.select(
            F.col(UID), F.col(REMAINING), F.col(STATUS), total.alias("__charge"),
            matched.alias("__matched"), *(F.col(c) for c in user_level),
        )
        # user-level aggregators: the user's charge ONCE (max over their rows), not the sum
        units: Column = F.sum("__charge")
        for c in user_level:
            units = units + F.max(c)
        per_user = self.pin(per_row.groupBy(UID).agg(
            units.cast("long").alias(UNITS_COLUMN),
            F.min(REMAINING).alias(REMAINING),
            F.max(F.when(F.col("__matched"), F.col(STATUS))).alias(STATUS),
            F.max(F.col("__matched").cast("int")).alias("__matched"),
        ))
        # Computed once by the summary, read again by the ledger write (pinned until the
        # release ends); deterministic if evicted (the input is checkpointed, ledger files
        # are immutable).
        row = per_user.agg(
            F.sum("__matched").alias("rows"),
            F.sum(F.when(F.col(UNITS_COLUMN) > 0, 1).otherwise(0)).alias("users"),
            F.sum(UNITS_COLUMN).alias("units"),
            F.max(UNITS_COLUMN).alias("max"),
            F.sum(F.when(F.col(STATUS) == F.lit(CAPPED), 1).otherwise(0)).alias("capped"),
            F.sum(F.when(F.col(STATUS) == F.lit(EXCLUDED), 1).otherwise(0)).alias("excluded"),
            F.sum(F.when(F.col(UNITS_COLUMN) > F.col(REMAINING), 1).otherwise(0)).alias("over"),
        ).collect()[0]
        summary = ChargeSummary(
            rows_in_release=int(row["rows"] or 0),
            users_charged=int(row["users"] or 0),
            units_charged=int(row["units"] or 0),
            units_max=int(row["max"] or 0),
            users_capped=int(row["capped"] or 0),
            users_excluded=int(row["excluded"] or 0),
            overspent=int(row["over"] or 0),
        )
        charged = per_user.where(F.col(UNITS_COLUMN) > 0).select(
            F.col(UID).alias(USER_COLUMN), F.col(UNITS_COLUMN)
        )
        return charged, summary

    def distribution(
        self, df: DataFrame, budget_default: float | None = None
    ) -> BudgetDistribution:
        """Remaining and spent budgets of the table's users (exact percentiles).

        ``budget_default``: the job-wide budget when there is no budget column (the
        histogram's range; saves a Spark job).
        """
        once = df.select(UID, REMAINING, SPENT, BUDGET).dropDuplicates([UID])
        rem = F.col(REMAINING).cast("double") * F.lit(UNIT)
        spent = F.col(SPENT).cast("double") * F.lit(UNIT)
        qs = list(QUANTILES)

        def bucket(top: float) -> Column:
            width = top / HIST_BINS
            return F.least(F.floor(rem / F.lit(width)).cast("int"), F.lit(HIST_BINS - 1))

        # With a job-wide budget the histogram range is known: one Spark job for everything.
        known = float(budget_default) if budget_default else None
        hist: list[Column] = []
        if known:
            at = bucket(known)  # built once: each Column call is a py4j round trip
            hist = [F.sum(F.when(at == i, 1).otherwise(0)).alias(f"h{i}")
                    for i in range(HIST_BINS)]
        row = once.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.when(F.col(REMAINING) == 0, 1).otherwise(0)).alias("exhausted"),
            F.percentile(rem, qs).alias("rq"),
            F.percentile(spent, qs).alias("sq"),
            F.sum(spent).alias("total"),
            F.max(F.col(BUDGET).cast("double") * F.lit(UNIT)).alias("top"),
            *hist,
        ).collect()[0]
        n = int(row["n"])
        if n == 0:
            return BudgetDistribution(0, 0, {}, {}, 0.0)
        top = known or float(row["top"] or 0.0) or 1.0
        width = top / HIST_BINS
        if known:
            counts = [int(row[f"h{i}"] or 0) for i in range(HIST_BINS)]
        else:
            counts = [0] * HIST_BINS
            for r in once.groupBy(bucket(top).alias("b")).count().collect():
                counts[int(r["b"])] += int(r["count"])
        return BudgetDistribution(
            users=n,
            exhausted=int(row["exhausted"] or 0),
            remaining_quantiles={q: float(v) for q, v in zip(qs, row["rq"], strict=True)},
            spent_quantiles={q: float(v) for q, v in zip(qs, row["sq"], strict=True)},
            total_spent=float(row["total"] or 0.0),
            hist_edges=[i * width for i in range(HIST_BINS + 1)],
            hist_counts=counts,
        )

    def with_constant(self, df: DataFrame, column: str, value: float) -> DataFrame:
        """``df`` with a double column holding ``value`` on every row."""
        return df.withColumn(column, F.lit(float(value)).cast("double"))

    def only_full(self, df: DataFrame) -> DataFrame:
        """The rows whose ``__status`` is full."""
        return df.where(F.col(STATUS) == F.lit(FULL))

    def clip_eps(self, df: DataFrame, column: str, upper: float) -> DataFrame:
        """The ε ``column`` lowered to ``upper`` where above it (null and NaN untouched:
        ``least`` would turn them into ``upper``)."""
        _has(df, column, "ε")
        e = F.col(column).cast("double")
        bound = F.lit(float(upper))
        return df.withColumn(column, F.when(~F.isnan(e) & (e > bound), bound).otherwise(e))

    def person_eps(self, df: DataFrame, column: str) -> DataFrame:
        """The ε ``column`` replaced by each user's smallest safe ε (one window by user)."""
        _has(df, column, "ε")
        e = F.col(column).cast("double")
        safe = F.when(e.isNull() | F.isnan(e) | (e < 0), F.lit(0.0)).otherwise(e)
        return df.withColumn(column, F.min(safe).over(Window.partitionBy(UID)))

    def level_counts(
        self, df: DataFrame, column: str, grid: EpsGrid | None
    ) -> list[tuple[float, int]]:
        """``(ε level, rows)`` sorted by level (one aggregate query)."""
        _has(df, column, "ε")
        rows = with_level(df, column, grid, "__lv").groupBy("__lv").count().collect()
        return sorted((float(r["__lv"]), int(r["count"])) for r in rows)

    def release_input(self, df: DataFrame, extra: Sequence[str] = ()) -> DataFrame:
        """The table without the runner's helper columns (and ``extra``)."""
        return df.drop(UID, REMAINING, STATUS, SPENT, BUDGET, START, *extra)

    def keep_start(self, prepared: DataFrame) -> DataFrame:
        """The input with ``__start`` = the remaining budget of :meth:`prepare`."""
        return prepared.drop(UID, SPENT, BUDGET).withColumnRenamed(REMAINING, START)

    def limit_remaining(self, prepared: DataFrame, share: float) -> DataFrame:
        """``__remaining`` := ``min(__remaining, floor(__start · share))`` (the same IEEE
        double product as the pandas adapter and the simulation)."""
        part = F.floor(F.col(START).cast("double") * F.lit(float(share))).cast("long")
        return prepared.withColumn(REMAINING, F.least(F.col(REMAINING), part))

    def columns_frame(self, df: DataFrame, columns: Sequence[str]) -> Any:
        """``columns``, collected as a pandas frame."""
        return df.select(*columns).toPandas()

    def public_frame(self, prepared: DataFrame, columns: Sequence[str]) -> Any:
        """The public ``columns`` and ``__remaining``, collected as a pandas frame."""
        return prepared.select(*columns, REMAINING).toPandas()
