"""A job run with `unsafe_seed` marks values.parquet (schema metadata
``hdp_unsafe_seed: true``); a job without it does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_helpers import write_job

from hdp_spark.jobs import run_job


@pytest.mark.parametrize("seed", ["s1", None])
def test_job_values_parquet_metadata(tmp_path: Path, seed: str | None) -> None:
    import pyarrow.parquet as pq
    run_job(write_job(tmp_path, seed=seed))
    files = [p for p in (tmp_path / "out").glob("*/*/values.parquet")
             if not p.parent.parent.name.startswith(".")]
    assert files
    for path in files:
        meta = pq.read_schema(path).metadata or {}
        assert (meta.get(b"hdp_unsafe_seed") == b"true") is (seed is not None)
