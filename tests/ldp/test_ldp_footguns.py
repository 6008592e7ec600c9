"""LDP aggregation refuses `by` naming a report or ε column; LDP bounds must have a finite
range and midpoint (both engines)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.ldp as L
from hdp_spark.errors import ParameterError


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"r": [0.5, -0.2, 0.9, 0.1], "eps": [1.0, 1.0, 0.5, 0.5], "g": ["a", "b", "a", "b"]}
    )


SPEC = L.ldp_mean("r", eps="eps", mechanism="laplace")


def run(engine: Any, **kwargs: Any) -> pd.DataFrame:
    # reports made outside the library (the production case): declared, not marked
    out = L.agg(engine.frame(frame()), SPEC, already_randomized=True, **kwargs)
    return out if engine.name == "pandas" else out.toPandas()


@pytest.mark.parametrize(
    ("by", "keys", "column", "role"),
    [("r", [0.5], "r", "report column"), ("eps", [1.0], "eps", "ε column")],
)
def test_by_naming_a_private_column_is_refused(
    engine: Any, by: str, keys: list[Any], column: str, role: str
) -> None:
    with pytest.raises(ParameterError) as err:
        run(engine, by=by, keys=keys)
    assert f"`by` names `{column}`, the {role} of `{SPEC.name}`" in str(err.value)


def test_by_on_a_public_column_still_works(engine: Any) -> None:
    out = run(engine, by="g", keys=np.array(["b", "a"]))
    assert list(out["g"]) == ["b", "a"]
    assert all(type(v) is str for v in out["g"])


@pytest.mark.parametrize(
    ("lower", "upper", "match"),
    [
        (1e308, 1.7e308, r"`lower \+ upper` must be a finite float"),
        (-1e308, 1e308, r"`upper - lower` must be a finite float"),
    ],
)
def test_bounds_that_overflow_are_refused(lower: float, upper: float, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        L.ldp_mean("r", eps="eps", mechanism="laplace", lower=lower, upper=upper)
    with pytest.raises(ParameterError, match=match):
        L.laplace([0.5], 1.0, lower=lower, upper=upper, unsafe_seed=1)
