"""User-level mean footguns on both engines: a private `by` column, overflowing bounds,
and the rows-per-cell limit of the 64-bit sums (pandas)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import hdp_spark.core.stats as core_stats
import hdp_spark.pandas as hpd
from hdp_spark.core.user_mean import hdp_user_mean
from hdp_spark.errors import ParameterError, SchemaError

SPEC = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1)


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "user": [1, 1, 2, 3, 3, 3],
            "x": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
            "eps": [1.0, 1.0, 0.5, 2.0, 2.0, 2.0],
            "g": ["a", "a", "b", "a", "a", "a"],
        }
    )


def run(engine: Any, pdf: pd.DataFrame, spec: Any, **kwargs: Any) -> pd.DataFrame:
    out = engine.module.user_mean(engine.frame(pdf), spec, **kwargs)
    return out if engine.name == "pandas" else out.toPandas()


@pytest.mark.parametrize(
    ("by", "keys", "column", "role"),
    [
        ("user", [1, 2], "user", "user id column"),
        ("x", [0.1], "x", "value column"),
        ("eps", [1.0], "eps", "ε column"),
    ],
)
def test_by_naming_a_private_column_is_refused(
    engine: Any, by: str, keys: list[Any], column: str, role: str
) -> None:
    with pytest.raises(ParameterError) as err:
        run(engine, frame(), SPEC, by=by, keys=keys, unsafe_seed=1)
    assert f"`by` names `{column}`, the {role} of `{SPEC.name}`" in str(err.value)


@pytest.mark.parametrize(
    ("lower", "upper", "match"),
    [
        (1e308, 1.7e308, r"`lower \+ upper` must be a finite float"),
        (-1e308, 1e308, r"`upper - lower` must be a finite float"),
    ],
)
def test_bounds_that_overflow_are_refused(lower: float, upper: float, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        hdp_user_mean("x", user="user", eps="eps", lower=lower, upper=upper)


def test_cells_over_the_row_limit_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    df = pd.concat([frame()] * 10, ignore_index=True)
    df["user"] = df["user"] + 10 * (df.index // 6)  # 30 users: k = 2, 1, 3
    out = hpd.user_mean(df, SPEC, unsafe_seed=1)
    assert out["x_user_mean_users"][0] == 30  # under the real limit
    monkeypatch.setattr(core_stats, "MAX_CELL_ROWS", 5)
    with pytest.raises(SchemaError, match=r"at most 5 rows per \(group, ε level\) cell"):
        hpd.user_mean(df, SPEC, unsafe_seed=1)
