"""pandas native cells of the mean: the per-(group, ε level) count and encoded sums.

The release itself is :mod:`hdp_spark.core.pipeline` (``agg`` in :mod:`hdp_spark.pandas._agg`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.encoding import encode_numpy
from hdp_spark.core.keys import normalize_key
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.release import LevelPlan
from hdp_spark.core.stats import GroupStats, build_groups
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas._common import numeric_column

__all__ = ["level_tables"]


def level_tables(
    df: pd.DataFrame,
    plans: Sequence[LevelPlan],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[dict[tuple[object, ...], GroupStats]]:
    """The per-(group, ε level) tables of each plan (count and encoded sums)."""
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    for col in by:
        if col not in df.columns:
            msg = f"group column `{col}` is not in the table."
            raise SchemaError(msg)
    if keys is not None:
        if len(by) == 1:
            mask = df[by[0]].isin([k[0] for k in keys]).to_numpy()
        else:
            index = pd.MultiIndex.from_frame(df[list(by)])
            mask = np.asarray(index.isin(list(keys)))
        df = df.loc[mask]
    tables = []
    for plan in plans:
        eps = numeric_column(df, plan.eps, "ε")
        frame: dict[str, Any] = {f"__by{i}": df[c].to_numpy() for i, c in enumerate(by)}
        frame["__level"] = levels_numpy(eps, plan.grid)
        for i, spec in enumerate(plan.specs):
            values = numeric_column(df, spec.column, "value")
            frame[f"__q{i}"] = encode_numpy(values, spec.lower, spec.upper, spec.fill_value)
        work = pd.DataFrame(frame)
        group_cols = [f"__by{i}" for i in range(len(by))] + ["__level"]
        sums = [f"__q{i}" for i in range(len(plan.specs))]
        named = {"__n": ("__level", "size")} | {q: (q, "sum") for q in sums}
        res = work.groupby(group_cols, sort=False, dropna=False).agg(**named).reset_index()
        width = len(by)
        cells = [
            (
                tuple(normalize_key(k) for k in row[:width]),
                float(row[width]),
                int(row[width + 1]),
                [int(x) for x in row[width + 2 :]],
            )
            for row in res.itertuples(index=False, name=None)
        ]
        tables.append(build_groups(plan.eps, cells))
    return tables
