"""A complex column is refused like any other non-real dtype (pandas would drop the
imaginary part when reading it as float): ε, value and category columns alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark.errors import SchemaError


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        (hpd.hdp_mean("x", eps="ceps", lower=0, upper=3),
         "ε column `ceps` must be numeric (real)"),
        (hpd.hdp_mean("cx", eps="eps", lower=0, upper=3),
         "value column `cx` must be numeric (real)"),
        (hpd.hdp_histogram("cx", eps="eps", categories=[1, 2], other=None),
         "category column `cx` must be numeric"),
    ],
)
def test_complex_columns_are_refused(spec: object, rule: str) -> None:
    table = pd.DataFrame({"x": [1.0, 2.0], "eps": [1.0, 1.0],
                          "ceps": np.array([1 + 0j, 2 + 1j]), "cx": np.array([1 + 0j, 2 + 0j])})
    with pytest.raises(SchemaError, match=rule.replace("(", r"\(").replace(")", r"\)")):
        hpd.agg(table, spec)
