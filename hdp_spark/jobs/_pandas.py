"""pandas implementation of :class:`~hdp_spark.jobs.adapter.EngineAdapter` (vectorized)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.ledger import (
    EXCLUDED,
    FULL,
    UNIT,
    BudgetPolicy,
    ChargeMode,
    budget_units_numpy,
    cap_numpy,
    remaining_units_numpy,
)
from hdp_spark.core.levels import EpsGrid, levels_numpy
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
from hdp_spark.jobs.charging import charged_once, clip_demand, limit_units, row_charges
from hdp_spark.jobs.spec import BudgetSpec, InputSpec
from hdp_spark.jobs.values import plain
from hdp_spark.ledger.base import UNITS_COLUMN, USER_COLUMN
from hdp_spark.ledger.io import PandasIO
from hdp_spark.pandas.engine import PandasEngine

__all__ = ["PandasAdapter"]

SPENT = "__spent"
BUDGET = "__budget"


def _column(df: pd.DataFrame, column: str, role: str) -> pd.Series:
    if column not in df.columns:
        msg = f"{role} column `{column}` is not in the table."
        raise SchemaError(msg)
    return df[column]


def _real(dtype: Any) -> bool:
    """Numeric, not boolean, not complex (the aggregators' rule for a value column)."""
    types = pd.api.types
    return (types.is_numeric_dtype(dtype) and not types.is_bool_dtype(dtype)
            and not types.is_complex_dtype(dtype))


def _floats(df: pd.DataFrame, column: str, role: str) -> np.ndarray:
    s = _column(df, column, role)
    if not _real(s.dtype):
        msg = f"{role} column `{column}` must be numeric (real), got dtype {s.dtype}."
        raise SchemaError(msg)
    return s.to_numpy(dtype=np.float64, na_value=np.nan)


_TRUE = frozenset({"true", "t", "yes", "y", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})
_LONG_LIMIT = 2.0**63


def _doubles(s: pd.Series) -> np.ndarray:
    """``s`` as float64; a cell that does not parse as a number becomes NaN (never raises)."""
    if pd.api.types.is_bool_dtype(s):
        return s.astype("boolean").astype("Float64").to_numpy(np.float64, na_value=np.nan)
    if pd.api.types.is_numeric_dtype(s):
        return s.to_numpy(dtype=np.float64, na_value=np.nan)
    parsed = pd.to_numeric(s.astype(object), errors="coerce")
    return parsed.to_numpy(dtype=np.float64, na_value=np.nan)


def _cast(s: pd.Series, kind: str) -> pd.Series:
    """Cast one column on load; whatever does not parse becomes null (a private cell must
    never make the read fail). The Spark twin is ``hdp_spark.spark.job_adapter._cast``."""
    if kind == "double":
        return pd.Series(_doubles(s), index=s.index, dtype=np.float64)
    if kind == "long":
        if pd.api.types.is_integer_dtype(s) and not pd.api.types.is_bool_dtype(s):
            return s.astype("Int64")
        x = _doubles(s)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(x) & (np.abs(x) < _LONG_LIMIT) & (x == np.round(x))
        values = np.where(ok, x, 0.0).astype(np.int64)
        return pd.Series(pd.arrays.IntegerArray(values, ~ok), index=s.index)
    if kind == "boolean":
        if pd.api.types.is_bool_dtype(s):
            return s.astype("boolean")
        if pd.api.types.is_numeric_dtype(s):
            x = _doubles(s)
            ok = ~np.isnan(x)
            return pd.Series(pd.arrays.BooleanArray(np.where(ok, x != 0, False), ~ok),
                             index=s.index)
        text = s.astype(object).where(s.isna(), s.astype(str).str.strip().str.lower())
        truth = text.isin(_TRUE).to_numpy()
        known = truth | text.isin(_FALSE).to_numpy()
        return pd.Series(pd.arrays.BooleanArray(truth, ~known), index=s.index)
    return s.where(s.isna(), s.astype(str))


class PandasAdapter:
    """The job runner's operations on pandas DataFrames."""

    name = "pandas"

    def __init__(self) -> None:
        self.io = PandasIO()

    def engine(self, df: pd.DataFrame) -> PandasEngine:
        """The core pipeline's engine over ``df``."""
        return PandasEngine(df)

    def count(self, df: pd.DataFrame) -> int:
        """Rows of ``df``."""
        return len(df)

    def to_records(self, table: pd.DataFrame) -> list[dict[str, Any]]:
        """The rows of a released table (a null of a float column stays NaN, as pandas
        holds it)."""
        records = table.to_dict(orient="records")
        return [{str(k): plain(v) for k, v in r.items()} for r in records]

    def load(self, spec: InputSpec) -> pd.DataFrame:
        """Read the CSV or parquet input and cast the schema's columns and ``[input.types]``.

        Privacy:
            A value cell that does not parse as its column's type becomes null (imputed by
            the aggregators), so whether the read succeeds never depends on a private value.
        """
        if spec.path is None:
            msg = "the pandas engine reads files; `[input] table` needs engine = 'spark'."
            raise SchemaError(msg)
        if spec.resolved_format == "csv":
            df = pd.read_csv(spec.path)
        else:
            import pyarrow.parquet as pq

            df = pq.read_table(spec.path).to_pandas()
        explicit = {c for c, _ in spec.types}
        for col, kind in spec.casts:
            if col not in explicit and col not in df.columns:
                continue  # a declared column that is missing: schema validation names it
            df[col] = _cast(_column(df, col, "typed"), kind)
        return df

    def content_hash(self, df: pd.DataFrame) -> str:
        """Order-independent hash of the rows (sum and xor of per-row 64-bit hashes).

        Unkeyed: HMAC input only (the runner keys it with the ledger's secret); never store,
        log or publish it.
        """
        h = pd.util.hash_pandas_object(df, index=False).to_numpy(np.uint64)
        total = int(h.astype(object).sum()) if len(h) else 0
        xor = int(np.bitwise_xor.reduce(h)) if len(h) else 0
        payload = f"{len(df)}:{total}:{xor}:{list(df.columns)}".encode()
        return hashlib.sha256(payload).hexdigest()  # design-ok: HMAC input only

    def validate(self, df: pd.DataFrame, schema: Any) -> Any:
        """``hdp_spark.pandas.validate(df, schema)`` (issue 5)."""
        import hdp_spark.pandas as hpd

        return hpd.validate(df, schema)

    def validate_input(
        self, df: pd.DataFrame, schema: Any, user_col: str, budget: BudgetSpec
    ) -> tuple[Any, Callable[[], InputCheck]]:
        """:meth:`validate`, and :meth:`check_input` run when the function is called."""
        return self.validate(df, schema), lambda: self.check_input(df, user_col, budget)

    def check_input(self, df: pd.DataFrame, user_col: str, budget: BudgetSpec) -> InputCheck:
        """Null/duplicate user ids and invalid budgets, as counts."""
        uid = _column(df, user_col, "user id")
        nulls = int(uid.isna().sum())
        dups = int(uid[uid.notna()].astype(str).duplicated().sum())
        col = _floats(df, budget.column, "budget") if budget.column else None
        _units, invalid = budget_units_numpy(col, budget.default, len(df))
        inconsistent = 0
        if dups and budget.column:
            frame = pd.DataFrame({"u": uid.astype(str), "b": col})
            inconsistent = int((frame.groupby("u")["b"].nunique(dropna=False) > 1).sum())
        return InputCheck(len(df), nulls, dups, invalid, inconsistent)

    def prepare(
        self, df: pd.DataFrame, user_col: str, budget: BudgetSpec, spent: pd.DataFrame
    ) -> pd.DataFrame:
        """Add ``__uid``, ``__remaining`` (and the spend and budget, in units)."""
        uid = df[user_col].astype(str)
        lookup = pd.Series(
            spent[UNITS_COLUMN].to_numpy(np.int64), index=spent[USER_COLUMN].astype(str)
        )
        spent_units = uid.map(lookup).fillna(0).to_numpy(np.int64)
        col = _floats(df, budget.column, "budget") if budget.column else None
        budget_units, _invalid = budget_units_numpy(col, budget.default, len(df))
        remaining = remaining_units_numpy(budget_units, spent_units)
        return df.assign(
            **{UID: uid.to_numpy(), REMAINING: remaining, SPENT: spent_units, BUDGET: budget_units}
        )

    def restrict(
        self, df: pd.DataFrame, by: tuple[str, ...], keys: tuple[Key, ...] | None
    ) -> pd.DataFrame:
        """Rows whose group key is in ``keys`` (all rows for a global release)."""
        if keys is None:
            return df
        for col in by:
            _column(df, col, "group")
        if len(by) == 1:
            mask = df[by[0]].isin([k[0] for k in keys]).to_numpy()
        else:
            index = pd.MultiIndex.from_frame(df[list(by)])
            mask = np.asarray(index.isin(list(keys)))
        return df.loc[mask]

    def cap(
        self, df: pd.DataFrame, columns: Sequence[tuple[str, int]], policy: BudgetPolicy
    ) -> pd.DataFrame:
        """Capped ε columns (replacing the originals) and ``__status``.

        No columns (a release of charge-free kinds only): every row is full.
        """
        if not columns:
            return df.assign(**{STATUS: np.full(len(df), FULL, dtype=np.int8)})
        arrays = [(_floats(df, c, "ε"), m) for c, m in columns]
        outcome = cap_numpy(arrays, df[REMAINING].to_numpy(np.int64), policy)
        out = df.copy()
        for (c, _), capped in zip(columns, outcome.eps, strict=True):
            out[c] = capped
        out[STATUS] = outcome.status
        return out

    def count_over(self, df: pd.DataFrame) -> int:
        """Rows whose ε had to be capped or excluded."""
        return int((df[STATUS].to_numpy() != FULL).sum())

    def count_public(self, df: pd.DataFrame, columns: Sequence[str]) -> int:
        """Rows whose ε is +∞ (public rows) in any of ``columns`` (before :meth:`cap`)."""
        public = np.zeros(len(df), dtype=bool)
        for c in columns:
            public |= np.isposinf(_floats(df, c, "ε"))
        return int(public.sum())

    def charges(
        self,
        df: pd.DataFrame,
        by: tuple[str, ...],
        aggs: Sequence[AggCharge],
        mode: ChargeMode = "effective",
    ) -> tuple[pd.DataFrame, ChargeSummary]:
        """Per-user charges of one release and their summary."""
        n = len(df)
        total = np.zeros(n, dtype=np.int64)
        matched = np.zeros(n, dtype=bool)
        uids = df[UID].to_numpy()
        for agg in aggs:
            eps = _floats(df, agg.eps_column, "ε")
            level = levels_numpy(eps, agg.grid)
            cells = list(agg.effective.items())
            lookup: dict[str, Any] = {
                f"__by{i}": pd.Series([k[i] for (k, _), _ in cells]).astype(df[c].dtype)
                for i, c in enumerate(by)
            }
            lookup["__level"] = pd.Series([lv for (_, lv), _ in cells], dtype=np.float64)
            lookup["__eff"] = pd.Series([e for _, e in cells], dtype=np.float64)
            left: dict[str, Any] = {f"__by{i}": df[c].to_numpy() for i, c in enumerate(by)}
            left["__level"] = level
            on = [*(f"__by{i}" for i in range(len(by))), "__level"]
            merged = pd.DataFrame(left).merge(pd.DataFrame(lookup), how="left", on=on)
            eff = merged["__eff"].to_numpy(np.float64)
            matched |= ~np.isnan(eff)
            units = row_charges(eff, eps, mode)
            if agg.per_user:  # user-level: the user's charge once (their rows share a cell)
                units = charged_once(units, uids)
            total += units
        frame = pd.DataFrame({USER_COLUMN: uids, UNITS_COLUMN: total})
        per_user = frame.groupby(USER_COLUMN, sort=False, as_index=False)[UNITS_COLUMN].sum()
        remaining = pd.Series(df[REMAINING].to_numpy(np.int64), index=df[UID].to_numpy())
        remaining = remaining[~remaining.index.duplicated()]
        over = per_user[UNITS_COLUMN].to_numpy() > remaining.reindex(
            per_user[USER_COLUMN]).to_numpy()
        charged = per_user[per_user[UNITS_COLUMN] > 0].reset_index(drop=True)
        status = df[STATUS].to_numpy() if STATUS in df.columns else np.zeros(n, np.int8)
        # per user (as on Spark): matched if any row is, status the largest of matched rows
        users = pd.DataFrame({
            "u": uids, "m": matched,
            "s": np.where(matched, status.astype(np.int64), -1),
        }).groupby("u", sort=False).agg(m=("m", "max"), s=("s", "max"))
        user_status = users["s"].to_numpy()
        summary = ChargeSummary(
            rows_in_release=int(users["m"].sum()),
            users_charged=len(charged),
            units_charged=int(charged[UNITS_COLUMN].sum()),
            units_max=int(charged[UNITS_COLUMN].max()) if len(charged) else 0,
            users_capped=int(((user_status != FULL) & (user_status != EXCLUDED)
                              & (user_status >= 0)).sum()),
            users_excluded=int((user_status == EXCLUDED).sum()),
            overspent=int(over.sum()),
        )
        return charged, summary

    def distribution(
        self, df: pd.DataFrame, budget_default: float | None = None
    ) -> BudgetDistribution:
        """Remaining and spent budgets of the table's users (``budget_default``: the
        job-wide budget when there is no budget column; the histogram's range)."""
        once = df.drop_duplicates(UID)
        remaining = once[REMAINING].to_numpy(np.int64).astype(np.float64) * UNIT
        spent = once[SPENT].to_numpy(np.int64).astype(np.float64) * UNIT
        budget = once[BUDGET].to_numpy(np.int64).astype(np.float64) * UNIT
        if len(once) == 0:
            return BudgetDistribution(0, 0, {}, {}, 0.0)
        top = float(budget_default) if budget_default else (float(budget.max()) or 1.0)
        width = top / HIST_BINS
        # the same IEEE operations as the Spark twin: floor(x / width), top bin closed
        bins = np.minimum(np.floor(remaining / width), HIST_BINS - 1).astype(np.int64)
        counts = np.bincount(bins, minlength=HIST_BINS)
        return BudgetDistribution(
            users=len(once),
            exhausted=int((once[REMAINING].to_numpy() == 0).sum()),
            remaining_quantiles={q: float(np.quantile(remaining, q)) for q in QUANTILES},
            spent_quantiles={q: float(np.quantile(spent, q)) for q in QUANTILES},
            total_spent=float(spent.sum()),
            hist_edges=[i * width for i in range(HIST_BINS + 1)],
            hist_counts=[int(c) for c in counts],
        )

    def with_constant(self, df: pd.DataFrame, column: str, value: float) -> pd.DataFrame:
        """``df`` with a float64 column holding ``value`` on every row."""
        return df.assign(**{column: np.full(len(df), float(value), dtype=np.float64)})

    def only_full(self, df: pd.DataFrame) -> pd.DataFrame:
        """The rows whose ``__status`` is full."""
        out: pd.DataFrame = df.loc[df[STATUS].to_numpy() == FULL]
        return out

    def clip_eps(self, df: pd.DataFrame, column: str, upper: float) -> pd.DataFrame:
        """The ε ``column`` lowered to ``upper`` where above it (NaN stays NaN)."""
        return df.assign(**{column: clip_demand(_floats(df, column, "ε"), upper)})

    def person_eps(self, df: pd.DataFrame, column: str) -> pd.DataFrame:
        """The ε ``column`` replaced by each user's smallest safe ε (see the protocol)."""
        eps = _floats(df, column, "ε")
        safe = np.where(np.isnan(eps) | (eps < 0), 0.0, eps)
        smallest = pd.Series(safe, index=df.index).groupby(df[UID].to_numpy()).transform("min")
        return df.assign(**{column: smallest.to_numpy(np.float64)})

    def level_counts(
        self, df: pd.DataFrame, column: str, grid: EpsGrid | None
    ) -> list[tuple[float, int]]:
        """``(ε level, rows)`` sorted by level."""
        levels, counts = np.unique(levels_numpy(_floats(df, column, "ε"), grid),
                                   return_counts=True)
        return [(float(v), int(n)) for v, n in zip(levels, counts, strict=True)]

    def pin(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` itself: a pandas frame is computed once already."""
        return df

    def unpin(self) -> None:
        """Nothing to release."""

    def release_input(self, df: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
        """The table without the runner's helper columns (and ``extra``)."""
        return df.drop(columns=[c for c in (UID, REMAINING, STATUS, SPENT, BUDGET, START,
                                            *extra) if c in df.columns])

    def keep_start(self, prepared: pd.DataFrame) -> pd.DataFrame:
        """The input with ``__start`` = the remaining budget of :meth:`prepare`."""
        return prepared.drop(columns=[UID, SPENT, BUDGET]).rename(columns={REMAINING: START})

    def limit_remaining(self, prepared: pd.DataFrame, share: float) -> pd.DataFrame:
        """``__remaining`` := ``min(__remaining, floor(__start · share))``."""
        limited = limit_units(prepared[REMAINING].to_numpy(np.int64),
                              prepared[START].to_numpy(np.int64), share)
        return prepared.assign(**{REMAINING: limited})

    def columns_frame(self, df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
        """A copy of ``columns``."""
        return df[list(columns)].copy()

    def public_frame(self, prepared: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
        """The public ``columns`` and ``__remaining``."""
        out: pd.DataFrame = prepared[[*columns, REMAINING]]
        return out
