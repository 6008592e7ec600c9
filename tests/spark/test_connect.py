"""Spark Connect runs the same aggregations as classic PySpark and pandas."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark import EpsGrid

pytestmark = pytest.mark.spark


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 400
    return pd.DataFrame(
        {
            "x": rng.uniform(-20, 120, n),
            "eps": rng.choice([0.1, 0.5, 1.0, 3.0, math.inf], n),
            "g": rng.choice(["a", "b", "c"], n),
        }
    )


def test_connect_matches_pandas(tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql.connect")
    pdf = _table()
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    path = tmp_path / "table.parquet"
    pdf.to_parquet(path)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("connect_job.py")), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "connect" in payload["session"]
    got = pd.DataFrame(payload["rows"])
    want = hpd.agg(
        pdf,
        hpd.hdp_mean("x", eps="eps", lower=0, upper=100),
        hpd.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", alias="a",
                     eps_grid=EpsGrid(ratio=1.5, lowest=0.01, highest=10)),
        by="g",
        keys=["a", "b", "z"],
        unsafe_seed=11,
    ).drop(columns=["x_mean_eps_levels", "a_eps_levels"])
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
