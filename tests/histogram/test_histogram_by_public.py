"""A histogram refuses `by` naming its category column or its ε column (both engines)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from histogram_testlib import run_histogram

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.errors import ParameterError


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"c": ["a", "b", "a", "b"], "eps": [1.0, 0.5, 1.0, 2.0], "g": ["x", "y", "x", "y"]}
    )


SPEC = hdp_histogram("c", eps="eps", categories=["a", "b"])


@pytest.mark.parametrize(
    ("by", "keys", "column", "role"),
    [
        ("c", ["a", "b"], "c", "category column"),
        ("eps", [1.0], "eps", "ε column"),
        (["g", "c"], [("x", "a")], "c", "category column"),
    ],
)
def test_by_naming_a_private_column_is_refused(
    engine: Any, by: Any, keys: list[Any], column: str, role: str
) -> None:
    with pytest.raises(ParameterError) as err:
        run_histogram(engine, frame(), SPEC, by=by, keys=keys, unsafe_seed=1)
    text = str(err.value)
    assert "`by` must name public grouping attributes only" in text
    assert f"`by` names `{column}`, the {role} of `{SPEC.name}`" in text


def test_by_on_a_public_column_still_works(engine: Any) -> None:
    out = run_histogram(engine, frame(), SPEC, by="g", keys={"y", "x"}, unsafe_seed=1)
    assert list(out["g"].drop_duplicates()) == ["x", "y"]  # a set of keys is sorted
