"""Spark Connect runs every aggregator exactly as pandas does (same seed, same numbers)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from connect_job import connect_cases, connect_errors, plain

import hdp_spark.pandas as hpd

pytestmark = pytest.mark.spark


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 400
    uid = rng.integers(0, 60, n)
    planted = rng.random(n) < 0.7  # one heavy record (1, 1, 1) for the heavy hitters
    return pd.DataFrame(
        {
            "x": rng.uniform(-20, 120, n),
            "eps": rng.choice([0.1, 0.5, 1.0, 3.0, math.inf], n),
            "g": rng.choice(["a", "b", "c"], n),
            "c": rng.choice(["u", "v", "w", "q"], n),
            "uid": uid,
            "ueps": np.array([0.5, 1.0, 2.0])[uid % 3],  # constant within a user
            "r": rng.uniform(-6, 6, n),
            "eps_ldp": rng.choice([0.25, 0.5, 1.0], n),
            "h0": np.where(planted, 1, rng.integers(0, 4, n)),
            "h1": np.where(planted, 1, rng.integers(0, 4, n)),
            "h2": np.where(planted, 1, rng.integers(0, 4, n)),
        }
    )


@pytest.fixture(scope="module")
def connect_payload(tmp_path_factory: pytest.TempPathFactory,
                    bare_connect_server: Any) -> dict[str, object]:
    """``connect_job.run`` on the run's Connect server built without the extension (the
    release API needs none), as ``connect_job.py`` runs alone."""
    pytest.importorskip("pyspark.sql.connect")
    path = tmp_path_factory.mktemp("connect") / "table.parquet"
    _table().to_parquet(path)
    payload: dict[str, object] = bare_connect_server.run(
        Path(__file__).with_name("connect_job.py"), str(path))
    assert "connect" in str(payload["session"])
    return payload


@pytest.mark.parametrize("name", list(connect_cases(hpd)))
def test_connect_matches_pandas(connect_payload: dict[str, object], name: str) -> None:
    got = pd.DataFrame(connect_payload[name])
    want = plain(connect_cases(hpd)[name](_table()))
    want = pd.DataFrame(json.loads(json.dumps(want.to_dict(orient="records"), default=str)))
    assert len(want) > 0
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


@pytest.mark.parametrize("name", list(connect_errors(hpd)))
def test_connect_refuses_derived_keys_and_private_by(
    connect_payload: dict[str, object], name: str
) -> None:
    errors = connect_payload["errors"]
    assert isinstance(errors, dict)
    got = errors[name]
    assert got.startswith("ParameterError: "), got
    if name.startswith("keys_"):
        assert "`keys` must be a public input from outside the data" in got
    else:
        assert "`by` must name public grouping attributes only" in got


def test_connect_keys_frame_keeps_the_callers_order(connect_payload: dict[str, object]) -> None:
    assert [r["g"] for r in connect_payload["mean_keys_frame"]] == ["b", "z", "a"]
    hist = pd.DataFrame(connect_payload["histogram_keys_frame"])
    assert list(hist["g"].drop_duplicates()) == ["c", "a"]
