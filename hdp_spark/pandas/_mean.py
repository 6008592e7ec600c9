"""pandas native cells of the mean: the per-(group, ε level) count and encoded sums.

The release itself is :mod:`hdp_spark.core.pipeline` (``agg`` in :mod:`hdp_spark.front.release`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hdp_spark.core.level_table import LevelTable
from hdp_spark.core.release import LevelPlan
from hdp_spark.pandas._cells import mean_cells

__all__ = ["level_tables"]


def level_tables(
    df: pd.DataFrame,
    plans: Sequence[LevelPlan],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[LevelTable]:
    """The per-(group, ε level) tables of each plan (count and encoded sums); see
    :func:`hdp_spark.pandas._cells.mean_cells`."""
    return mean_cells(df, plans, by, keys)
