"""Golden outputs: every public release function gives bit-identical numbers (fixed seeds)
before and after the one-pipeline refactor (issue 16), on pandas and on Spark."""

from __future__ import annotations

import json
from typing import Any

import pytest
from golden_cases import GOLDEN, canonical, cases, ldp_frame_of, table

import hdp_spark.pandas as hpd

_WANT: dict[str, Any] = json.loads(GOLDEN.read_text())
_NAMES = list(cases(hpd, ldp_frame_of(hpd)))


def test_golden_file_covers_every_case() -> None:
    assert sorted(_WANT) == sorted(f"{e}/{n}" for e in ("pandas", "spark") for n in _NAMES)


@pytest.mark.parametrize("name", _NAMES)
def test_pandas_matches_golden(name: str) -> None:
    got = canonical(cases(hpd, ldp_frame_of(hpd))[name](table()))
    assert got == _WANT[f"pandas/{name}"]


@pytest.fixture(scope="module")
def spark_outputs(spark: Any) -> dict[str, dict[str, Any]]:
    import hdp_spark.spark as hs

    df = spark.createDataFrame(table()).repartition(3)
    return {name: canonical(run(df)) for name, run in cases(hs, ldp_frame_of(hs)).items()}


@pytest.mark.spark
@pytest.mark.parametrize("name", _NAMES)
def test_spark_matches_golden(spark_outputs: dict[str, dict[str, Any]], name: str) -> None:
    assert spark_outputs[name] == _WANT[f"spark/{name}"]
