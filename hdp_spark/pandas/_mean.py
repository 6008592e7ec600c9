"""pandas implementation of the per-(group, ε level) statistics and of ``agg``."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hdp_spark.core.keys import normalize_by
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.release import (
    AggSpec,
    LevelPlan,
    ReleaseResult,
    finalize_release,
    plan_levels,
)
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.stats import GroupStats
from hdp_spark.pandas._cells import mean_cells
from hdp_spark.pandas._common import (
    KeysLike,
    mark_unsafe,
    release_keys,
)
from hdp_spark.pandas.schema import check_release

__all__ = ["agg", "level_tables", "release"]


def level_tables(
    df: pd.DataFrame,
    plans: Sequence[LevelPlan],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[dict[tuple[object, ...], GroupStats]]:
    """The per-(group, ε level) tables of each plan (count and encoded sums); see
    :func:`hdp_spark.pandas._cells.mean_cells`."""
    return mean_cells(df, plans, by, keys)


def release(
    df: pd.DataFrame,
    *specs: AggSpec,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> ReleaseResult:
    """Run one release on a pandas DataFrame and return the engine-neutral result.

    See :func:`agg` for the arguments.
    """
    by_t = normalize_by(by, specs)
    key_t = release_keys(df, keys, by_t)
    plans = plan_levels(specs)
    if schema is not None:
        check_release(df, schema, specs, by_t)
    tables = level_tables(df, plans, by_t, key_t)
    return finalize_release(specs, plans, tables, by_t, key_t, ReleaseKey.resolve(unsafe_seed))


def agg(
    df: pd.DataFrame,
    *specs: AggSpec,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> pd.DataFrame:
    """Release heterogeneous-DP aggregates of a pandas DataFrame.

    Args:
        df: the input table, one row per user (ε column included).
        *specs: aggregators, e.g. ``hdp_mean("salary", eps="eps", lower=0, upper=1e5)``.
        by: optional group-by column(s), public grouping attributes only: a column a
            spec reads as data (value, category, report or user id column) or as its ε
            column is refused, as grouping by it would publish exact per-value counts
            through ``_n``.
        keys: the public key set of a grouped release (list of values, list of tuples for
            several ``by`` columns, or a DataFrame with the ``by`` columns). Every key gets
            a row; rows with other keys are left out.
            KEY SETS MUST BE PUBLIC INPUTS FROM OUTSIDE THE DATA (a catalogue, a calendar,
            a reference table): a key set computed from the released table, such as its
            distinct values, reveals which keys occur whatever noise is added. Keys that are
            detectably derived from ``df`` (the same object, a view sharing its memory, or
            on Spark a DataFrame whose plan contains ``df``'s) are refused; a list collected
            from the data cannot be detected and is the caller's responsibility. Ordered
            containers keep their order in the output; a set is sorted.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production:
            anyone who knows the seed can remove the noise.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df``. When given, the
            release first checks that it reads declared columns only, then counts the
            schema's blocking rules (ε column, user id column, row count: public inputs) and
            raises before any statistic, noise or result exists; value rules never block
            (see docs/bad_input.md). ``None`` (default) skips this step.

    Returns:
        One row per group (one row for a global release); columns are documented in
        :func:`hdp_spark.hdp_mean`.

    Privacy:
        Each call is one release with fresh noise; calling it twice spends the budget
        twice. The returned frame is materialized: reading it again never redraws noise.
        See :func:`hdp_spark.hdp_mean` for what is protected and what is public.
    """
    result = release(df, *specs, by=by, keys=keys, unsafe_seed=unsafe_seed, schema=schema)
    rows = result.rows()
    columns = list(rows[0].keys())
    return mark_unsafe(pd.DataFrame(rows, columns=columns), result.unsafe_seed)
